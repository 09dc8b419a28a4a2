"""The standard deployment (webserver + daemon on the project's dagster.yaml) started with bare
`postgresql://` URLs: runs launched through GraphQL, the sensors ticking, the CLI beside it."""

from __future__ import annotations

import json

import pytest

from tests.support.dagster_stack import SHARED_STACK_GROUP
from tests.support.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SHARED_STACK_GROUP)]


def test_bare_postgresql_urls_work_for_every_process(dagster_stack):
    assert dagster_stack.env["DAGSTER_POSTGRES_URL"].startswith("postgresql://")
    assert dagster_stack.env["CHESSBOARD_DATABASE_URL"].startswith("postgresql://")
    gql = dagster_stack.graphql
    # webserver + daemon + run worker: a run launched from the UI's API runs on the daemon's queue
    run_id = gql.launch_job("chessboard_aggregates_audit")
    run = gql.wait_for_run(run_id)
    assert run["status"] == "SUCCESS", dagster_stack.log_tail()
    # the CLI with the same environment writes to the same run history
    done = dagster_stack.cli("recalc", "drain")
    assert done.returncode == 0, done.stderr
    cli_run = json.loads(done.stdout.strip().splitlines()[-1])["runId"]
    tags = gql.run(cli_run)["tags"]
    # the command is its run's worker: run again when killed, never retried by the daemon
    assert (tags["pin/trigger"], tags["dagster/max_retries"]) == ("cli", "0")


INVENTORY_FRESHNESS = """{ assetNodeOrError(assetKey: {path: ["project_inventory_daily"]}) { ... on AssetNode {
  internalFreshnessPolicy { ... on TimeWindowFreshnessPolicy { failWindowSeconds warnWindowSeconds } }
  freshnessStatusInfo { freshnessStatus } } } }"""


def test_the_ui_shows_the_inventory_s_freshness_as_the_daemon_evaluates_it(dagster_stack):
    """The asset page's freshness: the policy's windows, and the state the daemon's freshness
    daemon records (a materialization makes a never-materialized inventory fresh)."""
    import dagster as dg

    gql = dagster_stack.graphql

    def node() -> dict:
        return gql.query(INVENTORY_FRESHNESS)["assetNodeOrError"]

    assert node()["internalFreshnessPolicy"] == {
        "failWindowSeconds": 50 * 3600,
        "warnWindowSeconds": 26 * 3600,
    }
    wait_until(lambda: "FRESHNESS_DAEMON" in gql.healthy_daemons(), 60, "the freshness daemon running")
    with dagster_stack.instance() as instance:
        if instance.get_latest_materialization_event(dg.AssetKey("project_inventory_daily")) is None:
            assert node()["freshnessStatusInfo"]["freshnessStatus"] == "UNKNOWN"
        instance.report_runless_asset_event(
            dg.AssetMaterialization("project_inventory_daily", partition="2026-12-01")
        )
    wait_until(
        lambda: node()["freshnessStatusInfo"]["freshnessStatus"] == "HEALTHY",
        90,
        "the inventory shown fresh after its materialization",
    )

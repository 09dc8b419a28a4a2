"""The standard deployment (webserver + daemon on the project's dagster.yaml) started with bare
`postgresql://` URLs: runs launched through GraphQL, the sensors ticking, the CLI beside it."""

from __future__ import annotations

import json

import pytest

from tests.support.dagster_stack import SHARED_STACK_GROUP

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

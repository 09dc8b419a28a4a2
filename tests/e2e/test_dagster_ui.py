"""What operators and analysts see in the Dagster UI, on the standard deployment (webserver + daemon
on the project's dagster.yaml): clicks in a real browser (Playwright driving Debian's chromium) and
the webserver's GraphQL API.

One stack for the module, a small Talent simulator (2 developers, 4 projects, 48 property objects)
made slow (latency per request) while an import must be caught running. The browser test saves
the screenshots the README shows (docs/ui-*.png).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.server import SimulatorServer
from tests.support.browser import (
    screenshot_when_settled,
)
from tests.support.dagster_stack import FINISHED, LOCATION, DagsterStack, stack_with_simulator
from tests.support.polling import wait_until

# Each test waits on the whole stack (webserver, daemon, run workers, browser) with deadlines that
# add up past the suite's 300 s per test on a loaded 2-core machine: the test's bound is theirs
# one worker runs the module (its fixtures start once): --dist loadgroup
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("test_dagster_ui")]

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPEC = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=12)
SLOW = dataclasses.replace(SPEC, latency_ms=500)  # ~40 s per import at page size 2
STAGE_ASSETS = ["developers", "projects", "buildings", "layout_groups", "layouts", "property_objects"]
IMPORT_TAG = {"pin/import": "talent_initial_import"}
CONFIG = {"resources": {"talent_import": {"config": {"page_size": 2, "workers": 1}}}}
ENV = {
    "CHESSBOARD_RECALC_DEBOUNCE_SECONDS": "1",
    "CHESSBOARD_RECALC_CAP_SECONDS": "5",
}


@dataclasses.dataclass
class Ui:
    stack: DagsterStack
    simulator: SimulatorServer
    partitions: list[str]
    # the terminate test's Dagster run, its import run and the run that resumed it
    terminated: tuple[str, str, str] | None = None

    @property
    def gql(self):
        return self.stack.graphql

    def import_runs(self) -> list[dict[str, Any]]:
        with self.stack.engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT * FROM chessboard.talent_import_runs ORDER BY started_at"))
            return [dict(r) for r in rows.mappings()]


@pytest.fixture(scope="module")
def ui(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[Ui]:
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, SPEC, ENV) as (
        stack,
        simulator,
    ):
        with stack.instance() as instance:  # the discovery sensor's first tick adds them
            wait_until(
                lambda: len(instance.get_dynamic_partitions("talent_developers")) == SPEC.developers,
                timeout=120,
                what="the developer partitions",
            )
            partitions = list(instance.get_dynamic_partitions("talent_developers"))
        yield Ui(stack, simulator, partitions)


def _poll(predicate, timeout: float, what: str):
    """wait_until at a pace the webserver's event-log queries can take."""

    def paced():
        value = predicate()
        if not value:
            time.sleep(0.3)
        return value

    return wait_until(paced, timeout=timeout, what=what)


def _open(page, ui: Ui, path: str) -> None:
    page.goto(ui.stack.webserver_url + path)


def _range_tags(keys: list[str]) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}


def _newest_run(ui: Ui, since: float, job: str = "__ASSET_JOB") -> dict[str, Any] | None:
    runs = [r for r in ui.gql.runs(job_name=job, limit=10) if r["creationTime"] >= since]
    return runs[-1] if runs else None


def _asset_materializations(ui: Ui, key: list[str], limit: int = 20) -> list[dict[str, Any]]:
    data = ui.gql.query(
        """
        query M($key: AssetKeyInput!, $limit: Int) {
          assetNodeOrError(assetKey: $key) {
            ... on AssetNode {
              assetMaterializations(limit: $limit) {
                partition runId
                metadataEntries { label
                  ... on IntMetadataEntry { intValue }
                  ... on TextMetadataEntry { text } }
              }
            }
          }
        }""",
        {"key": {"path": key}, "limit": limit},
    )
    return data["assetNodeOrError"]["assetMaterializations"]


def _metadata(materialization: dict[str, Any]) -> dict[str, Any]:
    return {e["label"]: e.get("intValue", e.get("text")) for e in materialization["metadataEntries"]}


def test_lineage_from_the_talent_sources_to_the_events(ui: Ui, page):
    data = ui.gql.query("{ assetNodes { assetKey { path } dependencyKeys { path } } }")
    deps = {
        "/".join(n["assetKey"]["path"]): {"/".join(d["path"]) for d in n["dependencyKeys"]}
        for n in data["assetNodes"]
    }
    for parent, child in zip(STAGE_ASSETS, STAGE_ASSETS[1:], strict=False):
        assert deps[child] == {parent, f"talent/{child}"}
    assert deps["developers"] == {"talent/developers"}
    assert {"layouts", "property_objects"} <= deps["chessboard_aggregates"]
    assert deps["pin_chessboard_events"] == {"chessboard_aggregates", "handbook_replica", *STAGE_ASSETS}
    _open(page, ui, "/asset-groups")
    page.get_by_text("talent_import", exact=True).last.wait_for()
    screenshot_when_settled(page, DOCS / "ui-lineage.png")  # the graph lays out


def test_the_inventory_backfills_its_days_one_run_at_a_time(ui: Ui):
    """The group's "Materialize all" also takes project_inventory_daily (the page shows it as the
    downstream neighbour of property_objects) and, when its backfill outlives the import, launches
    every day of it: pool project_inventory (limit 1) runs those one at a time, beside the import
    and the sensors' runs. A backfill of three days, as that one launches them; before the tests
    that click "Materialize all", whose inventory days would come first in the pool's queue."""
    today = dt.datetime.now(dt.UTC).date()
    days = [str(today - dt.timedelta(days=n)) for n in (3, 2, 1)]
    backfill = ui.gql.launch_backfill(
        {"assetSelection": [{"path": ["project_inventory_daily"]}], "partitionNames": days}
    )

    def finished_runs() -> list[dict[str, Any]] | None:
        runs = ui.gql.runs(tags={"dagster/backfill": backfill})
        done = len(runs) == len(days) and all(r["status"] in FINISHED for r in runs)
        return runs if done else None

    runs = _poll(finished_runs, 240, "the inventory backfill's three runs")
    assert sorted(r["tags"]["dagster/partition"] for r in runs) == days
    assert [r["allPools"] for r in runs] == [["project_inventory"]] * len(days)
    with ui.stack.instance() as instance:
        assert instance.event_log_storage.get_concurrency_info("project_inventory").slot_count == 1
    spans = sorted((r["startTime"], r["endTime"]) for r in runs)
    assert all(end <= later for (_, end), (later, _) in zip(spans, spans[1:], strict=False)), spans


def test_materialize_all_with_config_shows_progress_then_terminate_and_resume(ui: Ui, page):
    ui.simulator.set_spec(SLOW)
    try:
        since = time.time()
        _open(page, ui, "/asset-groups/talent_import")
        page.get_by_role("button", name="Materialize all").click()
        dialog = page.locator(".bp5-dialog").filter(has_text="Launch runs to materialize")
        dialog.get_by_role("button", name="All", exact=True).click()
        dialog.get_by_text("Config", exact=True).click()
        dialog.get_by_role("button", name="Add config").click()
        editor = page.locator(".bp5-dialog").filter(has_text="Config Editor")
        editor.locator(".CodeMirror").first.click()
        page.keyboard.insert_text(
            "resources:\n  talent_import:\n    config:\n      page_size: 2\n      workers: 1\n"
        )
        editor.get_by_role("button", name="Save config").click()
        dialog.get_by_role("button", name="Launch backfill").click()

        run = _poll(lambda: _newest_run(ui, since), timeout=180, what="the backfill's run")
        run_id = run["runId"]
        # the page workers' lines and the progress of a long stage, while the run runs
        _poll(
            lambda: (
                {"page-applied", "stage-progress"}
                <= {m.split(" ", 1)[0] for m in ui.gql.run_messages(run_id)}
            ),
            timeout=180,
            what="page-applied and stage-progress lines",
        )
        ui.gql.terminate_run(run_id)  # what the run page's Terminate button calls
        assert ui.gql.wait_for_run(run_id, timeout=180)["status"] == "CANCELED"
        # a cancel: the page step in flight stops, no retry of it; the step it stopped is not a
        # success (Dagster has no cancelled step) but a failure of one `cancelled:` line, and the
        # run ends CANCELED without the interrupt's red stack trace
        events = ui.gql.run_events(run_id)
        kinds = [e["__typename"] for e in events]
        assert "ExecutionStepUpForRetryEvent" not in kinds, kinds
        assert "RunCanceledEvent" in kinds
        stopped = _step_failures(ui, run_id)
        assert stopped and all(s.startswith("cancelled: the run was stopped; ") for s in stopped), stopped
        assert all("\n" not in s for s in stopped), stopped
        failed_steps = {e["stepKey"] for e in events if e["__typename"] == "ExecutionStepFailureEvent"}
        assert not failed_steps & {
            e["stepKey"] for e in events if e["__typename"] == "ExecutionStepSuccessEvent"
        }
        errors = _run_errors(ui, run_id)
        assert not [e for e in errors if "DagsterExecutionInterruptedError" in e], errors
        assert any("stopped: the run was terminated" in m for m in ui.gql.run_messages(run_id))
        _open(page, ui, f"/runs/{run_id}")
        page.get_by_placeholder("Filter").fill("PropertyObjects")
        page.get_by_text("stage-progress").first.wait_for()
        page.get_by_text("page-applied").first.wait_for()
        page.screenshot(path=str(DOCS / "ui-run-logs.png"))
        # the stopped step's one line, and the run Canceled
        page.get_by_placeholder("Filter").fill(f"step:{sorted(failed_steps)[0]}")
        page.get_by_text("cancelled: the run was stopped").first.wait_for()
        page.get_by_text("Canceled", exact=True).first.wait_for()
        (DOCS / "screenshots").mkdir(exist_ok=True)
        page.screenshot(path=str(DOCS / "screenshots" / "terminated-run-cancelled-step.png"))
        line = next(m for m in ui.gql.run_messages(run_id) if m.startswith("page-applied"))
        for field in ("RunId=", "CorrelationId=", "Stage=", "PageNo="):
            assert field in line
        [started] = ui.import_runs()
        assert f"RunId={started['id']}" in line and f"CorrelationId={run_id}" in line
        wait_until(
            lambda: ui.import_runs()[0]["status"] == "Cancelled", timeout=120, what="the import run Cancelled"
        )
    finally:
        ui.simulator.set_spec(SPEC)

    # what the run page's "Re-execute from failure" calls
    data = ui.gql.query(
        """
        mutation R($parent: String!) {
          launchRunReexecution(reexecutionParams: {parentRunId: $parent, strategy: FROM_FAILURE}) {
            __typename ... on LaunchRunSuccess { run { runId } } ... on Error { message }
          }
        }""",
        {"parent": run_id},
    )
    again = data["launchRunReexecution"]["run"]
    assert ui.gql.wait_for_run(again["runId"], timeout=240)["status"] == "SUCCESS", ui.stack.log_tail()
    # the pages left are worked in the stopped page step, started again under its key
    assert any(
        m.startswith("propertyObject: this process") and "applied 0 page(s)" not in m
        for m in _step_messages(ui, again["runId"], "property_objects.property_objects_pages[0]")
    )
    [resumed] = ui.import_runs()  # the same import run, resumed
    assert resumed["id"] == started["id"] and resumed["status"] == "Completed"
    assert resumed["correlation_id"] == run_id and resumed["dagster_run_id"] == again["runId"]
    assert resumed["stage_counters"]["PropertyObjects"]["applied"] == dataset.count(SPEC, "property-objects")

    ui.terminated = (run_id, started["id"], again["runId"])


def _step_messages(ui: Ui, run_id: str, step: str) -> list[str]:
    return [e["message"] for e in ui.gql.run_events(run_id) if e.get("stepKey") == step]


def _step_failures(ui: Ui, run_id: str) -> list[str]:
    """The descriptions of the run's failed steps (the UI shows each beside its step)."""
    data = ui.gql.query(
        """
        query L($id: ID!) {
          logsForRun(runId: $id) {
            ... on EventConnection {
              events { ... on ExecutionStepFailureEvent { failureMetadata { description } error { message } } }
            }
          }
        }""",
        {"id": run_id},
    )
    return [
        (e["failureMetadata"] or {}).get("description") or e["error"]["message"]
        for e in data["logsForRun"]["events"]
        if "error" in e
    ]


def _run_errors(ui: Ui, run_id: str) -> list[str]:
    """Every error the run's log shows in red (steps' and the run's own): type, message and stack."""
    errors: list[str] = []
    cursor = None
    while True:
        data = ui.gql.query(
            """
            query E($id: ID!, $cursor: String) {
              logsForRun(runId: $id, afterCursor: $cursor) {
                ... on EventConnection {
                  cursor hasMore
                  events { __typename ... on ErrorEvent { error { message stack } } }
                }
              }
            }""",
            {"id": run_id, "cursor": cursor},
        )["logsForRun"]
        errors += [
            f"{e['__typename']}: {e['error']['message']}{''.join(e['error']['stack'])}"
            for e in data["events"]
            if e.get("error")
        ]
        cursor = data["cursor"]
        if not data["hasMore"]:
            return errors


def _latest_by_partition(ui: Ui) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for m in _asset_materializations(ui, ["property_objects"]):
        latest.setdefault(m["partition"], _metadata(m))
    return latest


def test_each_developer_partition_carries_its_own_figures_first(ui: Ui, page):
    per_developer = SPEC.projects_per_developer * SPEC.objects_per_project
    if set(_latest_by_partition(ui)) != set(ui.partitions):  # alone (-k): one import of them all first
        tags = _range_tags(ui.partitions)
        run_id = ui.gql.launch_job("__ASSET_JOB", run_config=CONFIG, tags=tags, asset_keys=STAGE_ASSETS)
        assert ui.gql.wait_for_run(run_id, timeout=300)["status"] == "SUCCESS", ui.stack.log_tail()
    latest = _latest_by_partition(ui)
    assert set(latest) == set(ui.partitions)
    for key, metadata in latest.items():
        assert key.startswith("gk-")  # the developer's name, then its Talent id
        assert key.endswith(metadata["developer_id"])
        assert metadata["planned"] == metadata["applied"] == per_developer
        assert metadata["import_planned"] == dataset.count(SPEC, "property-objects")
        # the developer's own figures first, the import run's after
        labels = list(metadata)
        assert labels[:6] == ["developer_id", "developer_name", "planned", "applied", "skipped", "failed"], (
            labels
        )
        assert metadata["developer_name"]  # the current name beside the frozen key
        assert labels.index("import_planned") > labels.index("failed")
    # by clicks: the asset's page, its Partitions tab, one developer's partition
    _open(page, ui, "/assets/property_objects")
    page.get_by_role("tab", name="Partitions").click()
    partition = ui.partitions[0]
    page.get_by_title(partition, exact=True).first.click()  # the list shows it middle-truncated
    own = page.get_by_text("planned", exact=True).first
    run_wide = page.get_by_text("import_planned", exact=True).first
    own.wait_for()
    run_wide.wait_for()
    # the partition panel lists the developer's planned above the import run's
    assert own.bounding_box()["y"] < run_wide.bounding_box()["y"]
    page.get_by_text(latest[partition]["developer_id"], exact=True).first.wait_for()
    page.mouse.move(900, 860)  # off the list: no tooltip of the partition in the picture
    screenshot_when_settled(page, DOCS / "ui-partitions.png")
    # the import's checks and the events' lag check are evaluated on the latest materializations
    for key, name in (
        ("property_objects", "import_not_stuck"),
        ("pin_chessboard_events", "outbox_lag_within_slo"),
    ):
        status = _poll(
            lambda key=key, name=name: _check_status(ui, key, name),
            timeout=120,
            what=f"{name} evaluated on the latest materialization of {key}",
        )
        assert status == "SUCCEEDED", (key, name, status)


def _check_status(ui: Ui, key: str, name: str) -> str | None:
    """What the asset's Checks tab shows for the check: the status of its evaluation for the latest
    materialization, None when that is "Not evaluated"."""
    data = ui.gql.query(
        """
        query C($key: AssetKeyInput!, $name: String!) {
          assetNodeOrError(assetKey: $key) {
            ... on AssetNode {
              assetCheckOrError(checkName: $name) {
                ... on AssetCheck { executionForLatestMaterialization { status } }
              }
            }
          }
        }""",
        {"key": {"path": [key]}, "name": name},
    )
    execution = data["assetNodeOrError"]["assetCheckOrError"].get("executionForLatestMaterialization")
    return execution["status"] if execution else None


def test_two_imports_launched_together_queue_and_the_cli_refuses(ui: Ui, page):
    tags = {
        "dagster/asset_partition_range_start": ui.partitions[0],
        "dagster/asset_partition_range_end": ui.partitions[-1],
    }
    ui.simulator.set_spec(SLOW)
    try:
        first, second = (
            ui.gql.launch_job("__ASSET_JOB", run_config=CONFIG, tags=tags, asset_keys=STAGE_ASSETS)
            for _ in range(2)
        )

        def one_running() -> tuple[str, str] | None:
            statuses = (ui.gql.run(first)["status"], ui.gql.run(second)["status"])
            return statuses if "STARTED" in statuses else None

        seen = _poll(one_running, timeout=180, what="one of the imports running")
        assert sorted(seen) == ["QUEUED", "STARTED"]  # the pool holds the other one in the queue
        running, waiting = (first, second) if seen[0] == "STARTED" else (second, first)
        _open(page, ui, "/deployment/concurrency/talent_import")
        page.get_by_text(waiting[:8]).first.wait_for()  # the pool's page lists it as queued
        page.screenshot(path=str(DOCS / "ui-import-pool.png"))
        # the CLI keeps the refusal: it waits at most the lock timeout, then exits 2 (a hang would
        # fail at cli's timeout)
        done = ui.stack.cli("import", env={"CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS": "2"}, timeout=180)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("CHESSBOARD_IMPORT_LOCK_HELD"), done.stderr
    finally:
        ui.simulator.set_spec(SPEC)
    one = ui.gql.wait_for_run(running, timeout=180)
    two = ui.gql.wait_for_run(waiting, timeout=180)
    assert (one["status"], two["status"]) == ("SUCCESS", "SUCCESS"), ui.stack.log_tail()
    assert two["startTime"] >= one["endTime"]  # never at the same time
    # every import run, whatever launched it, under one tag
    tagged = {r["runId"] for r in ui.gql.runs(tags=IMPORT_TAG, limit=50)}
    assert {first, second} <= tagged


def test_the_recalc_sensor_drains_and_the_publishes_are_materializations(ui: Ui):
    def drained() -> str | None:
        for run in ui.gql.runs(job_name="project_aggregates_recalc", limit=20):
            if any(m.startswith("project_recalculated") for m in ui.gql.run_messages(run["runId"])):
                return run["runId"]
        return None

    run_id = _poll(drained, timeout=180, what="a drain run with project_recalculated lines")
    assert ui.gql.run(run_id)["tags"].get("dagster/sensor_name") == "project_aggregates_recalc_sensor"
    _poll(
        lambda: _asset_materializations(ui, ["chessboard_aggregates"], 1),
        timeout=180,
        what="a chessboard_aggregates materialization",
    )
    published = _asset_materializations(ui, ["pin_chessboard_events"], 50)
    assert any(_metadata(m)["path"] == "fast path" for m in published)
    # the audit check is evaluated with the drain's materialization: not "Not evaluated"
    checks = _poll(
        lambda: {
            c["name"]: c["executionForLatestMaterialization"]
            for c in _aggregates_checks(ui)
            if c["executionForLatestMaterialization"]
        }.get("aggregates_match_formulas"),
        timeout=120,
        what="aggregates_match_formulas evaluated on the latest materialization",
    )
    assert checks["status"] == "SUCCEEDED"


def _aggregates_checks(ui: Ui) -> list[dict[str, Any]]:
    data = ui.gql.query(
        """
        {
          assetNodeOrError(assetKey: {path: ["chessboard_aggregates"]}) {
            ... on AssetNode {
              assetChecksOrError {
                ... on AssetChecks { checks { name executionForLatestMaterialization { runId status } } }
              }
            }
          }
        }"""
    )
    return data["assetNodeOrError"]["assetChecksOrError"]["checks"]


def test_a_cli_relay_run_is_listed_under_its_job(ui: Ui):
    done = ui.stack.cli("outbox", "relay", "--until-empty", timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["runId"]
    # what the job's Runs tab asks for: runs of the job in its code location
    listed = ui.gql.runs(job_name="outbox_relay", tags={".dagster/repository": f"__repository__@{LOCATION}"})
    assert run_id in {r["runId"] for r in listed}
    data = ui.gql.query(
        """
        query R($id: ID!, $location: String!) {
          runOrError(runId: $id) {
            ... on Run { pipelineSnapshotId repositoryOrigin { repositoryLocationName } }
          }
          pipelineOrError(params: {repositoryLocationName: $location, repositoryName: "__repository__",
                                   pipelineName: "outbox_relay"}) {
            ... on Pipeline { pipelineSnapshotId }
          }
        }""",
        {"id": run_id, "location": LOCATION},
    )
    # the run's job is the code location's: its page's Re-execute warns of no other version
    assert data["runOrError"]["repositoryOrigin"]["repositoryLocationName"] == LOCATION
    assert data["runOrError"]["pipelineSnapshotId"] == data["pipelineOrError"]["pipelineSnapshotId"]


def _partition_statuses(ui: Ui, key: str) -> dict[str, list[str]]:
    """What the asset's Partitions tab colours: materialized, failed, materializing partitions."""
    data = ui.gql.query(
        """
        query P($key: AssetKeyInput!) {
          assetNodeOrError(assetKey: $key) {
            ... on AssetNode {
              assetPartitionStatuses {
                ... on DefaultPartitionStatuses { materializedPartitions failedPartitions materializingPartitions }
              }
            }
          }
        }""",
        {"key": {"path": [key]}},
    )
    return data["assetNodeOrError"]["assetPartitionStatuses"]


def _latest_check_execution(ui: Ui, key: str, name: str) -> str | None:
    """The status of the check's latest execution, whatever run it was planned in."""
    data = ui.gql.query(
        """
        query X($key: AssetKeyInput!, $name: String!) {
          assetCheckExecutions(assetKey: $key, checkName: $name, limit: 1) { runId status }
        }""",
        {"key": {"path": [key]}, "name": name},
    )
    executions = data["assetCheckExecutions"]
    return executions[0]["status"] if executions else None


SCREENSHOTS = DOCS / "screenshots"


def test_a_second_re_execute_from_failure_starts_no_new_import(ui: Ui, page):
    """Last of the module: a second "Re-execute from failure" of the terminated run, whose import
    the first one resumed and Completed, is refused before any step starts: the run is a Success
    carrying the refusal (tag pin/refused, one warning line), and property_objects, its partitions
    and its checks keep the status they had, in GraphQL and on the pages an operator opens (a
    re-executed backfill's run: tests/integration/test_import_dagster.py)."""
    if ui.terminated is None:
        pytest.skip("needs the terminated and resumed import of the terminate test")
    run_id, import_run_id, resumed_by = ui.terminated
    before = _partition_statuses(ui, "property_objects")
    assert (
        sorted(before["materializedPartitions"]) == sorted(ui.partitions) and not before["failedPartitions"]
    )
    # sensors keep drain, relay and sync runs going: the run may wait in the queue for one to end
    twice = ui.gql.query(
        """
        mutation R($parent: String!) {
          launchRunReexecution(reexecutionParams: {parentRunId: $parent, strategy: FROM_FAILURE}) {
            __typename ... on LaunchRunSuccess { run { runId } } ... on Error { message }
          }
        }""",
        {"parent": run_id},
    )["launchRunReexecution"]["run"]["runId"]
    refusal = f"CHESSBOARD_IMPORT_INVALID_REQUEST: nothing to resume: import run {import_run_id}"
    done = ui.gql.wait_for_run(twice, timeout=360)
    assert done["status"] == "SUCCESS", (ui.gql.run_messages(twice), ui.stack.log_tail())
    assert done["tags"]["pin/refused"].startswith(refusal)
    events = ui.gql.run_events(twice)
    assert not [e for e in events if e["__typename"].startswith("ExecutionStep")], events  # no step
    warnings = [e["message"] for e in events if e.get("level") in ("WARNING", "ERROR", "CRITICAL")]
    assert warnings == [done["tags"]["pin/refused"]]
    assert _step_failures(ui, twice) == [] and _run_errors(ui, twice) == []
    resumed = [r for r in ui.import_runs() if r["correlation_id"] == run_id]
    assert [(r["id"], r["dagster_run_id"]) for r in resumed] == [(import_run_id, resumed_by)]
    # the asset as it was: every partition Materialized, none Failed; the checks not failed
    after = _partition_statuses(ui, "property_objects")
    assert sorted(after["materializedPartitions"]) == sorted(ui.partitions), after
    assert not after["failedPartitions"] and not after["materializingPartitions"], after
    # (the refused run planned them and evaluated none: Dagster shows them Skipped in it, not failed)
    for name in ("no_quarantined_items", "import_not_stuck"):
        for status in (
            _check_status(ui, "property_objects", name),
            _latest_check_execution(ui, "property_objects", name),
        ):
            assert status in ("SUCCEEDED", "SKIPPED"), (name, status)

    # by clicks: the run's page says Success and the refusal; the asset's page shows no failure
    SCREENSHOTS.mkdir(exist_ok=True)
    _open(page, ui, f"/runs/{twice}")
    page.get_by_text(refusal).first.wait_for()
    page.get_by_text("Success", exact=True).first.wait_for()
    page.screenshot(path=str(SCREENSHOTS / "refused-re-execution-run.png"))
    _open(page, ui, "/assets/property_objects?view=partitions")
    page.get_by_title(ui.partitions[0], exact=True).first.wait_for()
    # the Partitions tab's legend: every partition Materialized, none Failed
    page.get_by_text(f"Materialized ({len(ui.partitions)})", exact=True).first.wait_for()
    page.get_by_text("Failed (0)", exact=True).first.wait_for()
    assert not _failed_lines(page)
    screenshot_when_settled(page, SCREENSHOTS / "refused-re-execution-asset.png")
    _open(page, ui, "/assets/property_objects?view=checks")
    page.get_by_text("no_quarantined_items").first.wait_for()
    page.get_by_text("import_not_stuck").first.wait_for()
    assert not _failed_lines(page)
    screenshot_when_settled(page, SCREENSHOTS / "refused-re-execution-checks.png")


def _failed_lines(page) -> list[str]:
    """The lines of the page that say something failed ("Failed (0)", a count of none, aside)."""
    lines = page.locator("body").inner_text().splitlines()
    return [line for line in lines if "failed" in line.lower() and line.strip() != "Failed (0)"]

"""A full bootstrap and a CLI import as an operator sees them in the Dagster UI, on the standard
deployment (webserver + daemon on the project's dagster.yaml): real clicks in Debian's chromium
driven by Playwright, outcomes read from the webserver's GraphQL API and the chessboard database.

- the `talent_full_bootstrap` launchpad: "all developers, this config", one import run of the
  `talent_initial_import` job (no backfill) that imports every developer;
- a run of `pin-chessboard import` re-executed from its run page: the run belongs to its job, so the
  Re-execute button carries no "may be a different version" warning;
- the import job's graph with its six stages, and an import launched as a backfill listed by the
  README's Runs link (runs within backfills included);
- a finished import's run view: every step it lists ran, none "Not executed".

The screenshots are the README's and docs/talent-initial-import.md's (docs/ui-full-bootstrap-*.png,
docs/ui-cli-run-reexecute.png, docs/ui-import-job-graph.png, docs/screenshots/ui-import-run-steps.png).
"""

from __future__ import annotations

import dataclasses
import json
import re
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
    type_launchpad_config,
)
from tests.support.dagster_stack import LOCATION, DagsterStack, stack_with_simulator
from tests.support.polling import wait_until

# webserver, daemon, run workers and a browser on a loaded 2-core machine: the deadlines add up past
# the suite's 300 s per test
# one worker runs the module (its fixtures start once): --dist loadgroup
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("test_bootstrap_ui")]

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPEC = DatasetSpec(developers=3, projects_per_developer=2, objects_per_project=6)
IMPORT_JOB = "talent_initial_import"
IMPORT_TAG = {"pin/import": IMPORT_JOB}
STAGES = ["developers", "projects", "buildings", "layout_groups", "layouts", "property_objects"]


@dataclasses.dataclass
class Ui:
    stack: DagsterStack
    simulator: SimulatorServer
    finished_import: str = ""  # the run id of the full bootstrap's import, once it succeeded

    @property
    def gql(self):
        return self.stack.graphql

    def import_run(self, correlation_id: str) -> dict[str, Any] | None:
        with self.stack.engine.connect() as conn:
            row = conn.execute(
                sa.text("SELECT * FROM chessboard.talent_import_runs WHERE correlation_id = :c"),
                {"c": correlation_id},
            ).first()
        return dict(row._mapping) if row is not None else None

    def count(self, table: str) -> int:
        with self.stack.engine.connect() as conn:
            return conn.execute(sa.text(f"SELECT count(*) FROM chessboard.{table}")).scalar_one()


@pytest.fixture(scope="module")
def ui(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[Ui]:
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, SPEC) as (stack, simulator):
        yield Ui(stack, simulator)


def _job_path(job: str) -> str:
    return f"/locations/{LOCATION}/jobs/{job}"


def _run_id_of(page) -> str:
    page.wait_for_url("**/runs/**", timeout=120_000)
    return page.url.rstrip("/").split("/runs/")[1].split("?")[0]


def test_a_full_bootstrap_from_the_launchpad_imports_every_developer(ui: Ui, page):
    type_launchpad_config(
        page,
        f"{ui.stack.webserver_url}{_job_path('talent_full_bootstrap')}/playground",
        "ops:\n  launch_full_bootstrap:\n    config:\n      mode: ApiPull\n      page_size: 2\n"
        "      workers: 1\n",
    )
    page.get_by_text("page_size").first.wait_for()
    page.screenshot(path=str(DOCS / "ui-full-bootstrap-launchpad.png"))
    page.get_by_role("button", name="Launch Run").click()
    bootstrap_id = _run_id_of(page)
    bootstrap = ui.gql.wait_for_run(bootstrap_id, timeout=240)
    assert bootstrap["status"] == "SUCCESS", (ui.gql.run_messages(bootstrap_id), ui.stack.log_tail())
    [submitted] = [m for m in ui.gql.run_messages(bootstrap_id) if m.startswith("bootstrap-submitted ")]
    assert f"Developers={SPEC.developers}" in submitted

    # the import: one run of talent_initial_import over every developer partition, in no backfill
    [launched] = ui.gql.runs(tags={"pin/launched-by": bootstrap_id})
    import_id = launched["runId"]
    assert f"DagsterRunId={import_id}" in submitted
    assert launched["jobName"] == IMPORT_JOB
    assert launched["tags"]["pin/import"] == IMPORT_JOB
    assert "dagster/backfill" not in launched["tags"]
    done = ui.gql.wait_for_run(import_id, timeout=600)
    assert done["status"] == "SUCCESS", (ui.gql.run_messages(import_id)[-30:], ui.stack.log_tail())
    ui.finished_import = import_id
    with ui.stack.instance() as instance:
        partitions = list(instance.get_dynamic_partitions("talent_developers"))
    assert len(partitions) == SPEC.developers
    assert (
        launched["tags"]["dagster/asset_partition_range_start"],
        launched["tags"]["dagster/asset_partition_range_end"],
    ) == (partitions[0], partitions[-1])
    row = ui.import_run(import_id)
    assert row is not None and row["status"] == "Completed"
    assert row["developer_id_filter"] is None  # every developer: listed without a filter
    assert row["page_size"] == 2
    assert ui.count("developers") == SPEC.developers
    assert ui.count("property_objects") == dataset.count(SPEC, "property-objects")

    # Runs filtered by the import's tag with the runs within backfills, the README's link
    page.goto(f"{ui.stack.webserver_url}/runs?view=runs&q[0]=tag%3Apin%2Fimport%3D{IMPORT_JOB}")
    page.get_by_text(import_id[:8]).first.wait_for()
    # the bootstrap run links the import run, listed under its job
    page.goto(f"{ui.stack.webserver_url}/runs/{bootstrap_id}")
    page.get_by_text("import_run").first.wait_for()
    page.goto(f"{ui.stack.webserver_url}{_job_path(IMPORT_JOB)}/runs")
    page.get_by_text(import_id[:8]).first.wait_for()
    screenshot_when_settled(page, DOCS / "ui-full-bootstrap-run.png")


def test_a_finished_imports_run_view_lists_no_step_not_executed(ui: Ui, page):
    """The run view of the full bootstrap's import: its step panel lists the steps that ran (each
    stage's plan, its page step per process, its barrier) and no "Not executed" section."""
    assert ui.finished_import, "the full bootstrap's import ran (the test above)"
    page.goto(f"{ui.stack.webserver_url}/runs/{ui.finished_import}", wait_until="domcontentloaded")
    # every step succeeded: each stage's plan, one page step (processes 1) and barrier; the
    # import_not_stuck check
    succeeded = page.get_by_text(f"Succeeded ({len(STAGES) * 3 + 1})", exact=True).first
    succeeded.wait_for(timeout=120_000)
    skip = page.get_by_role("button", name="Skip")
    if skip.is_visible():  # Dagster's newsletter prompt, for the picture
        skip.click()
    assert page.get_by_text(re.compile(r"^Not executed")).count() == 0
    # the chart draws the first stage's steps at its top: one page step (processes 1), no dot of
    # a page step the run did not start
    page.locator('[data-tooltip="developers.developers_plan"]').first.wait_for()
    drawn = page.locator('[data-tooltip^="developers.developers_pages"]')
    names = [drawn.nth(i).get_attribute("data-tooltip") for i in range(drawn.count())]
    assert len(names) == 1, names  # the page step of the stage's one process (the dynamic step)
    succeeded.click()  # the section is collapsed at first
    page.get_by_text("property_objects.property_objects_pages[0]").first.wait_for()
    screenshot_when_settled(page, DOCS / "screenshots" / "ui-import-run-steps.png")


def test_the_import_jobs_graph_shows_the_six_stages_after_a_double_click(ui: Ui, page):
    # Dagster 1.13 fits an asset job's graph to the pane's width before the job's info panel opens
    # beside it, so the panel covers the right half (3 of the 6 stages); a double-click on the
    # graph's background fits it again to the pane it has now (README "Talent initial import")
    page.goto(f"{ui.stack.webserver_url}{_job_path(IMPORT_JOB)}")
    page.get_by_role("button", name="Materialize all").hover()  # (any prompt dismissed first)
    page.get_by_text("developers", exact=True).first.wait_for()
    page.get_by_text("pin/import: talent_initial_import").first.wait_for()  # the info panel is open
    time.sleep(2)  # its opening has settled
    page.mouse.dblclick(400, 300)  # the graph's background, left of the panel
    for stage in STAGES:
        page.get_by_text(stage, exact=True).first.wait_for()
    screenshot_when_settled(page, DOCS / "ui-import-job-graph.png")


def _reexecute_warning(ui: Ui, run_id: str) -> bool:
    """What the UI checks before it offers Re-execute without a warning: the run's job snapshot is
    the loaded job's, in the run's own code location."""
    data = ui.gql.query(
        """
        query R($runId: ID!, $job: PipelineSelector!) {
          runOrError(runId: $runId) { ... on Run { pipelineSnapshotId
            repositoryOrigin { repositoryName repositoryLocationName } } }
          pipelineOrError(params: $job) { ... on Pipeline { pipelineSnapshotId } }
        }""",
        {
            "runId": run_id,
            "job": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "pipelineName": IMPORT_JOB,
            },
        },
    )
    run, job = data["runOrError"], data["pipelineOrError"]
    return not (
        run["pipelineSnapshotId"] == job["pipelineSnapshotId"]
        and run["repositoryOrigin"]
        == {"repositoryName": "__repository__", "repositoryLocationName": LOCATION}
    )


def test_a_cli_import_is_re_executed_from_the_ui_without_the_version_warning(ui: Ui, page):
    done = ui.stack.cli("import", "--page-size", "7", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["correlationId"]  # the Dagster run
    assert ui.gql.run(run_id)["jobName"] == IMPORT_JOB
    assert not _reexecute_warning(ui, run_id)

    page.goto(f"{ui.stack.webserver_url}/runs/{run_id}")
    button = page.get_by_role("button", name="Re-execute all (*)")
    button.wait_for()
    button.hover()
    time.sleep(1)  # a tooltip shows after a short delay
    assert page.get_by_text("may be a different version").count() == 0
    assert page.get_by_text("may be different than the one used").count() == 0
    page.screenshot(path=str(DOCS / "ui-cli-run-reexecute.png"))
    button.click()
    page.wait_for_url(lambda url: "/runs/" in url and run_id not in url)  # the re-execution's page
    again = _run_id_of(page)
    assert again != run_id
    result = ui.gql.wait_for_run(again, timeout=600)
    assert result["status"] == "SUCCESS", (ui.gql.run_messages(again)[-30:], ui.stack.log_tail())
    assert ui.gql.run(again)["tags"].get("dagster/parent_run_id") == run_id


def test_an_import_launched_as_a_backfill_is_listed_by_the_readmes_runs_link(ui: Ui, page):
    run = _run_of_backfill(
        ui, _launch_backfill(ui, {"resources": {"talent_import": {"config": {"page_size": 5}}}})
    )
    assert ui.gql.wait_for_run(run["runId"], timeout=600)["status"] == "SUCCESS", ui.stack.log_tail()
    assert ui.gql.run(run["runId"])["tags"]["pin/import"] == IMPORT_JOB  # tagged by its first stage
    page.goto(f"{ui.stack.webserver_url}/runs?view=runs&q[0]=tag%3Apin%2Fimport%3D{IMPORT_JOB}")
    page.get_by_text(run["runId"][:8]).first.wait_for()


def _paced(predicate):
    """predicate for wait_until at a pace the webserver takes (its 20 ms polls are for the database)."""

    def paced():
        value = predicate()
        if not value:
            time.sleep(0.5)
        return value

    return paced


def _launch_backfill(ui: Ui, run_config: dict[str, Any]) -> str:
    """What Materialize all -> every partition -> Launch backfill sends (once the discovery sensor
    has added the developer partitions)."""
    with ui.stack.instance() as instance:
        wait_until(
            _paced(lambda: len(instance.get_dynamic_partitions("talent_developers")) == SPEC.developers),
            timeout=120,
            what="the developer partitions",
        )
    return ui.gql.launch_backfill(
        {
            "assetSelection": [{"path": [s]} for s in STAGES],
            "allPartitions": True,
            "runConfigData": run_config,
        }
    )


def _backfill_status(ui: Ui, backfill_id: str) -> str:
    data = ui.gql.query(
        "query S($id: String!) { partitionBackfillOrError(backfillId: $id) { ... on PartitionBackfill { status } } }",
        {"id": backfill_id},
    )
    return data["partitionBackfillOrError"]["status"]


def _import_run_in(ui: Ui, correlation_id: str, status: str) -> dict[str, Any] | None:
    row = ui.import_run(correlation_id)
    return row if row is not None and row["status"] == status else None


def _run_of_backfill(ui: Ui, backfill_id: str) -> dict[str, Any]:
    def first() -> dict[str, Any] | None:
        runs = ui.gql.runs(tags={"dagster/backfill": backfill_id}, limit=5)
        return runs[0] if runs else None

    return wait_until(_paced(first), timeout=240, what=f"the run of backfill {backfill_id}")


def test_a_terminated_backfill_is_finished_by_its_re_execution_from_failure(ui: Ui):
    # Dagster's way for a backfill whose import was terminated: the backfill page's Re-execute ->
    # From failure makes a new backfill, whose run resumes the same import run and ends it Completed
    ui.simulator.set_spec(dataclasses.replace(SPEC, latency_ms=400))
    try:
        first = _launch_backfill(
            ui, {"resources": {"talent_import": {"config": {"page_size": 2, "workers": 1}}}}
        )
        run = _run_of_backfill(ui, first)
        wait_until(
            _paced(lambda: any(m.startswith("page-applied") for m in ui.gql.run_messages(run["runId"]))),
            timeout=240,
            what="the backfill's import applying pages",
        )
        ui.gql.terminate_run(run["runId"])
        assert ui.gql.wait_for_run(run["runId"], timeout=180)["status"] == "CANCELED"
    finally:
        ui.simulator.set_spec(SPEC)
    wait_until(
        _paced(lambda: _backfill_status(ui, first) not in ("REQUESTED", "CANCELING")),
        timeout=240,
        what="the first backfill ended",
    )
    # the step that got the terminate ends the import run Cancelled; when it fell between two steps,
    # talent_import_canceled_sensor does
    cancelled = wait_until(
        _paced(lambda: _import_run_in(ui, run["runId"], "Cancelled")),
        timeout=120,
        what="the terminated import run Cancelled",
    )
    assert cancelled["dagster_run_id"] == run["runId"]

    data = ui.gql.query(
        """
        mutation R($params: ReexecutionParams!) {
          reexecutePartitionBackfill(reexecutionParams: $params) {
            __typename ... on LaunchBackfillSuccess { backfillId } ... on Error { message }
          }
        }""",
        {"params": {"parentRunId": first, "strategy": "FROM_FAILURE"}},
    )
    second = data["reexecutePartitionBackfill"]["backfillId"]
    again = _run_of_backfill(ui, second)
    assert ui.gql.wait_for_run(again["runId"], timeout=600)["status"] == "SUCCESS", ui.stack.log_tail()
    wait_until(
        _paced(lambda: _backfill_status(ui, second) == "COMPLETED_SUCCESS"),
        timeout=240,
        what="the re-execution's backfill a success",
    )
    resumed = ui.import_run(run["runId"])  # the same import run (its correlation id: the first run)
    assert resumed is not None and resumed["status"] == "Completed"
    assert resumed["dagster_run_id"] == again["runId"]
    assert _backfill_status(ui, first) != "COMPLETED_SUCCESS"  # the first keeps its own status

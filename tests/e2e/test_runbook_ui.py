"""The recalc runbook by clicks, on the standard deployment (webserver + daemon): an operator forces
the recalc of a project given by its name in the `recalc_runbook` launchpad, the drain sensor
recalculates it, and the queue's status (with a poison row) is on the `recalc_queue` asset's page.
Playwright drives Debian's chromium; the screenshots are the README's (docs/ui-runbook-*.png,
docs/ui-recalc-queue.png)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from pin_chessboard_pipelines.recalc.audit import audit
from tests.support.browser import chromium_page, type_launchpad_config
from tests.support.dagster_stack import LOCATION, SHARED_STACK_GROUP, DagsterStack
from tests.support.polling import wait_until
from tests.support.recalc_data import ProjectRows, StoreBuilder, queue, standard_project

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SHARED_STACK_GROUP)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
STALE = "ЖК Runbook Forced"  # aggregates never computed: the audit sees drift
POISONED = "ЖК Runbook Poisoned"
WAITING = "ЖК Runbook Waiting"  # requested, its DueAt still ahead


@pytest.fixture(scope="module")
def page(dagster_stack: DagsterStack) -> Iterator:
    with chromium_page(1400, 1000) as page:
        yield page


def _drift(engine, project_id) -> list:
    with engine.connect() as conn:
        return audit(conn, project_id)


def _aggregates(engine, project_id) -> tuple[int, int]:
    with engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT property_objects_total_count, property_objects_free_count "
                "FROM chessboard.projects WHERE id = :p"
            ),
            {"p": project_id},
        ).one()
    return row[0], row[1]


@pytest.fixture(scope="module")
def projects(dagster_stack: DagsterStack) -> tuple[ProjectRows, ProjectRows]:
    """A project whose aggregates were never computed, and one whose recalc row is poison."""
    with dagster_stack.engine.begin() as conn:
        b = StoreBuilder(conn)
        stale = standard_project(b, name=STALE)
        poisoned = standard_project(b, name=POISONED)
        b.request(poisoned, attempt_count=5)
        conn.execute(
            sa.text("UPDATE chessboard.project_recalc_requests SET last_error = :e WHERE project_id = :p"),
            {"e": "CHESSBOARD_SYNC_PARENT_NOT_FOUND: layout of another project", "p": poisoned.id},
        )
    return stale, poisoned


def test_force_recalc_of_a_project_by_name_from_the_launchpad(dagster_stack: DagsterStack, projects, page):
    engine = dagster_stack.engine
    stale, poisoned = projects
    assert _drift(engine, stale.id) and _aggregates(engine, stale.id) == (0, 0)

    type_launchpad_config(
        page,
        f"{dagster_stack.webserver_url}/locations/{LOCATION}/jobs/recalc_runbook/playground",
        f"ops:\n  recalc_runbook_step:\n    config:\n      step: FORCE_RECALC\n      project: {STALE}\n",
    )
    page.get_by_text("FORCE_RECALC").first.wait_for()
    page.screenshot(path=str(DOCS / "ui-runbook-launchpad.png"))
    launched = time.time()
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url("**/runs/**", timeout=120_000)
    run_id = page.url.rstrip("/").split("/runs/")[1].split("?")[0]
    run = dagster_stack.graphql.wait_for_run(run_id, timeout=240)
    assert run["status"] == "SUCCESS", (dagster_stack.graphql.run_messages(run_id), dagster_stack.log_tail())
    assert run["creationTime"] >= launched - 1
    messages = dagster_stack.graphql.run_messages(run_id)
    [requested] = [m for m in messages if m.startswith("recalc-requested ")]
    assert f"ProjectId={stale.id}" in requested and f"Project={STALE}" in requested

    # the drain sensor takes the forced row: aggregates recomputed, the row gone, the poison row kept
    def recalculated() -> bool:
        with engine.connect() as conn:
            rows = queue(conn)
        return stale.id not in rows and not _drift(engine, stale.id)

    wait_until(recalculated, timeout=240, what="the forced project recalculated by the drain")
    total, free = _aggregates(engine, stale.id)
    assert total > 0 and free > 0
    with engine.connect() as conn:
        assert queue(conn)[poisoned.id]["attempt_count"] == 5

    page.goto(f"{dagster_stack.webserver_url}/runs/{run_id}")
    page.get_by_placeholder("Filter").fill("recalc-")
    page.get_by_text("recalc-requested").first.wait_for()
    page.get_by_text("recalc-status").first.wait_for()
    page.screenshot(path=str(DOCS / "ui-runbook-run.png"))


def test_the_recalc_status_is_on_the_recalc_queue_asset(dagster_stack: DagsterStack, projects, page):
    # the queue sensor records what the queue holds now, without a runbook run: the poison row with
    # its project's name and last error, and a row whose DueAt is still ahead, with its DueAt
    with dagster_stack.engine.begin() as conn:
        b = StoreBuilder(conn)
        waiting = standard_project(b, name=WAITING)
        b.request(waiting, due_in_seconds=900)
        due_at = queue(conn)[waiting.id]["due_at"].isoformat(timespec="seconds")
    try:
        url = f"{dagster_stack.webserver_url}/assets/recalc_queue?view=events"

        def shows_waiting() -> bool:
            page.goto(url)
            try:
                page.get_by_text(WAITING).first.wait_for(timeout=10_000)
                return True
            except PlaywrightTimeout:
                return False

        wait_until(shows_waiting, timeout=120, what="the queue sensor's status with the waiting row")
        page.get_by_text(POISONED).first.wait_for()
        page.get_by_text(due_at).first.wait_for()
        page.get_by_text("waiting", exact=True).first.wait_for()
        for label in ("queue_depth", "held", "poison", "oldest_rows", "next_due_at"):
            page.get_by_text(label, exact=True).first.wait_for()
        page.get_by_text("CHESSBOARD_SYNC_PARENT_NOT_FOUND").first.wait_for()
        page.screenshot(path=str(DOCS / "ui-recalc-queue.png"), full_page=True)
        sensor = dagster_stack.graphql.sensor("recalc_queue_sensor")
        assert sensor["sensorState"]["status"] == "RUNNING"
        # a STATUS run of the runbook records the same status
        run_id = dagster_stack.graphql.launch_job(
            "recalc_runbook", run_config={"ops": {"recalc_runbook_step": {"config": {"step": "STATUS"}}}}
        )
        status = dagster_stack.graphql.wait_for_run(run_id, timeout=240)["status"]
        assert status == "SUCCESS", (dagster_stack.graphql.run_messages(run_id), dagster_stack.log_tail())
    finally:
        with dagster_stack.engine.begin() as conn:  # the stack's other tests see the queue they left
            conn.execute(
                sa.text("DELETE FROM chessboard.project_recalc_requests WHERE project_id = :p"),
                {"p": waiting.id},
            )


NOT_POISON = "ЖК Runbook Not Poison"  # requested twice and failed once or twice, not poison


def test_reset_poison_with_nothing_to_reset_is_a_success_saying_so(dagster_stack: DagsterStack, page):
    """RESET_POISON of a project whose recalc request is not poison finds nothing to do: the run
    is a Success whose log says so in one line, naming the project as typed (not its PIN id), no
    error, and the request keeps its AttemptCount and DueAt."""
    with dagster_stack.engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b, name=NOT_POISON)
        b.request(project, attempt_count=2, due_in_seconds=900)
        before = queue(conn)[project.id]
    try:
        type_launchpad_config(
            page,
            f"{dagster_stack.webserver_url}/locations/{LOCATION}/jobs/recalc_runbook/playground",
            f"ops:\n  recalc_runbook_step:\n    config:\n      step: RESET_POISON\n      project: {NOT_POISON}\n",
        )
        page.get_by_role("button", name="Launch Run").click()
        page.wait_for_url("**/runs/**", timeout=120_000)
        run_id = page.url.rstrip("/").split("/runs/")[1].split("?")[0]
        run = dagster_stack.graphql.wait_for_run(run_id, timeout=240)
        events = dagster_stack.graphql.run_events(run_id)
        assert run["status"] == "SUCCESS", (events, dagster_stack.log_tail())
        line = (
            f"RESET_POISON: nothing to reset, the recalc request of project '{NOT_POISON}' is not poison "
            "(AttemptCount 2 of 5); FORCE_RECALC makes it due now"
        )
        said = [e["message"] for e in events if "RESET_POISON" in (e.get("message") or "")]
        assert said == [line], said
        assert not [e for e in events if e.get("level") in ("ERROR", "CRITICAL")], events
        assert not [e for e in events if str(project.id) in (e.get("message") or "")]
        with dagster_stack.engine.connect() as conn:
            assert queue(conn)[project.id] == before  # nothing reset

        # by clicks: the run's page, Success and the line
        page.goto(f"{dagster_stack.webserver_url}/runs/{run_id}")
        page.get_by_placeholder("Filter").fill("RESET_POISON")
        page.get_by_text(line).first.wait_for()
        page.get_by_text("Success", exact=True).first.wait_for()
        screenshots = DOCS / "screenshots"
        screenshots.mkdir(exist_ok=True)
        page.screenshot(path=str(screenshots / "runbook-reset-poison-nothing-to-reset.png"))
    finally:
        with dagster_stack.engine.begin() as conn:  # the stack's other tests see the queue they left
            conn.execute(
                sa.text("DELETE FROM chessboard.project_recalc_requests WHERE project_id = :p"),
                {"p": project.id},
            )

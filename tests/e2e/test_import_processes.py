"""One import on three OS processes, on the standard deployment (webserver + daemon on the
project's dagster.yaml, CHESSBOARD_DAGSTER_EXECUTOR=multiprocess), launched through GraphQL as
talent_full_bootstrap's launchpad does (`processes: 3`, nothing else): the PropertyObjects pages
are claimed by the three processes at overlapping times, one worker process is SIGKILLed in
mid-stage and its page is applied by another process within 90 s, the run ends SUCCESS with every
page Done, the replica equal to the source and nothing applied twice; the browser shows the page
steps of the run.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from pin_chessboard_pipelines.defs.talent_import.bootstrap import BOOTSTRAP_OP
from pin_chessboard_pipelines.defs.talent_import.config import BOOTSTRAP_JOB, IMPORT_JOB
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants
from tests.support.browser import CHROMIUM, chromium_page
from tests.support.dagster_stack import DagsterStack, stack_with_simulator
from tests.support.polling import wait_until

# one worker runs the module (its fixtures start once): --dist loadgroup
pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.timeout(1500),
    pytest.mark.xdist_group("test_import_processes"),
]

# 80 PropertyObjects pages of 3; each read takes 80 ms, so a page is caught mid-way and the
# stage lasts long enough for every page step's process to start.
SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=40, latency_ms=80)
PROCESSES = 3
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def stack(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[DagsterStack]:
    multiprocess = {"CHESSBOARD_DAGSTER_EXECUTOR": "multiprocess"}
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, SPEC, multiprocess) as (
        started,
        _,
    ):
        yield started


def _pages(url: str) -> list[dict]:
    with get_engine(url).connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, page_no, status, claimed_by, claimed_at, finished_at, heartbeat_at"
                " FROM chessboard.talent_import_pages WHERE stage = 'PropertyObjects' ORDER BY page_no"
            )
        ).mappings()
        return [dict(r) for r in rows]


def _pid(claimed_by: str) -> int:
    return int(claimed_by.rsplit(":", 1)[1])


def _overlapping(pages: list[dict]) -> bool:
    """Two processes worked on the stage at the same time: the spans from each one's first claim to
    its last finished page overlap (a page of 3 staged items takes milliseconds, so single pages of
    two processes seldom do)."""
    spans: dict[str, tuple] = {}
    for page in pages:
        first, last = spans.get(page["claimed_by"], (page["claimed_at"], page["finished_at"]))
        spans[page["claimed_by"]] = (min(first, page["claimed_at"]), max(last, page["finished_at"]))
    return any(
        a != b and spans[a][0] < spans[b][1] and spans[b][0] < spans[a][1] for a in spans for b in spans
    )


def test_one_import_on_three_processes_survives_a_killed_worker(stack: DagsterStack, kafka_bootstrap):
    # the operator's way: talent_full_bootstrap's launchpad with `processes: 3`, nothing about the
    # executor (it asks the multiprocess executor for the 3 page steps at once; its default is 2)
    bootstrap_id = stack.graphql.launch_job(
        BOOTSTRAP_JOB,
        run_config={
            "ops": {BOOTSTRAP_OP: {"config": {"processes": PROCESSES, "workers": 1, "page_size": 3}}}
        },
    )
    bootstrap = stack.graphql.wait_for_run(bootstrap_id, timeout=240)
    assert bootstrap["status"] == "SUCCESS", stack.log_tail()
    [launched] = stack.graphql.runs(tags={"pin/launched-by": bootstrap_id})
    run_id = launched["runId"]
    assert launched["jobName"] == IMPORT_JOB
    data = stack.graphql.query(
        "query R($id: ID!) { runOrError(runId: $id) { ... on Run { runConfigYaml } } }", {"id": run_id}
    )
    assert yaml.safe_load(data["runOrError"]["runConfigYaml"])["execution"] == {
        "config": {"max_concurrent": PROCESSES}
    }

    def a_live_claim() -> dict | None:
        """A PropertyObjects page in progress once each of the three processes claimed pages of the
        stage (they work at once: one step per CPU would start the third when the stage is over)."""
        pages = _pages(stack.chessboard_url)
        if (
            sum(p["status"] == "Done" for p in pages) < 3
            or len({p["claimed_by"] for p in pages} - {None}) < PROCESSES
        ):
            return None
        return next((p for p in pages if p["status"] == "InProgress" and p["claimed_by"]), None)

    try:
        victim = wait_until(a_live_claim, 600, "a PropertyObjects page in progress")
    except AssertionError:
        messages = [f"{e.get('stepKey')}: {e.get('message')}" for e in stack.graphql.run_events(run_id)]
        raise AssertionError(
            f"run {stack.graphql.run(run_id)}\n" + "\n".join(messages[-60:]) + "\n" + stack.log_tail()
        ) from None
    os.kill(_pid(victim["claimed_by"]), signal.SIGKILL)
    killed_at = dt.datetime.now(dt.UTC)

    run = stack.graphql.wait_for_run(run_id, timeout=600)
    assert run["status"] == "SUCCESS", stack.log_tail()

    pages = _pages(stack.chessboard_url)
    assert {p["status"] for p in pages} == {"Done"}
    taken_over = next(p for p in pages if p["id"] == victim["id"])
    assert taken_over["claimed_by"] != victim["claimed_by"]  # applied by another process
    assert (taken_over["claimed_at"] - killed_at).total_seconds() < 90
    claimants = {p["claimed_by"] for p in pages}
    assert len(claimants) >= 2, claimants
    assert _overlapping(pages)

    report = invariants.check_all(stack.chessboard_url, SPEC, audit=False)
    report.add("applied once", invariants.applied_once(stack.chessboard_url))
    assert report.ok, str(report)

    started = {
        e["stepKey"]
        for e in stack.graphql.run_events(run_id)
        if (e.get("stepKey") or "").startswith("property_objects.property_objects_pages[")
        and (e.get("message") or "").startswith("Started execution of step")
    }
    assert len(started) == PROCESSES, started  # the page steps beyond `processes` were skipped, not run
    _shows_the_page_steps(stack, run_id)


def _shows_the_page_steps(stack: DagsterStack, run_id: str) -> None:
    """The run's page in chromium shows a page step of the stage that ran in a process of its own:
    its logs, filtered by the run page's step filter (the log follows its end), end with its own end."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: `make test` installs Debian's chromium")
    step = "property_objects.property_objects_pages[2]"
    with chromium_page(1600, 1000) as page:
        page.goto(f"{stack.webserver_url}/runs/{run_id}?logs=step:{step}", wait_until="domcontentloaded")
        try:
            # the quotes: Dagster's own message, not the filter's token
            page.get_by_text(f'Finished execution of step "{step}"').first.wait_for(timeout=240_000)
            skip = page.get_by_role("button", name="Skip")
            if skip.is_visible():  # Dagster's newsletter prompt, for the picture
                skip.click()
        finally:
            page.screenshot(path=str(DOCS / "ui-import-processes.png"))

"""A run worker killed in mid-import on the standard deployment (webserver + daemon on the project's
dagster.yaml, DefaultRunLauncher, the code location's gRPC server): without a click, the daemon
re-executes the run from failure (dagster.yaml `run_retries`), the retry resumes the same import run
(correlation id = the root run), takes the dead worker's page over at once instead of waiting out
its 600 s lease, and ends SUCCESS with the replica equal to the source, nothing applied twice and
nothing quarantined (docs/talent-initial-import.md#a-dead-run-worker).

Without `run_retries` in dagster.yaml the killed run stays FAILURE and no retry comes: the wait for
the retry times out.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.talent_import.bootstrap import BOOTSTRAP_OP
from pin_chessboard_pipelines.defs.talent_import.config import BOOTSTRAP_JOB, IMPORT_JOB
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants
from tests.support.dagster_stack import DagsterStack, stack_with_simulator
from tests.support.import_probe import scalar
from tests.support.polling import wait_until

# one worker runs the module (its stack starts once): --dist loadgroup
pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("test_import_run_retry"),
]

# 80 PropertyObjects pages of 3, each read taking 80 ms: the stage lasts long enough to be caught
# with pages Done and one in flight
SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=40, latency_ms=80)
PAGE_SIZE = 3
OBJECTS = 2 * 3 * 40
RETRY_SECONDS = 120  # the code server fails the run within 1 s, the daemon retries within 5 s


@pytest.fixture(scope="module")
def stack(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[DagsterStack]:
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, SPEC) as (started, _):
        yield started


def _in_flight_page(stack: DagsterStack) -> dict | None:
    """A PropertyObjects page InProgress once a few of the stage's pages are Done."""
    with stack.engine.connect() as conn:
        rows = [
            dict(r)
            for r in conn.execute(
                sa.text(
                    "SELECT id, status, claimed_by FROM chessboard.talent_import_pages"
                    " WHERE stage = 'PropertyObjects' ORDER BY page_no"
                )
            ).mappings()
        ]
    if sum(r["status"] == "Done" for r in rows) < 3:
        return None
    return next((r for r in rows if r["status"] == "InProgress" and r["claimed_by"]), None)


def _frozen_in_a_page(stack: DagsterStack, pid: int, claimant: str, timeout: float = 60) -> dict:
    """The run worker stopped (SIGSTOP) while it holds a PropertyObjects page InProgress: the page
    the SIGKILL will catch in flight (a page takes milliseconds once read, so a page seen
    InProgress a moment before a kill may be Done when it lands)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)  # a commit already on its way reaches the database
        with stack.engine.connect() as conn:
            page = (
                conn.execute(
                    sa.text(
                        "SELECT id, status, claimed_by FROM chessboard.talent_import_pages"
                        " WHERE stage = 'PropertyObjects' AND status = 'InProgress' AND claimed_by = :c"
                        " LIMIT 1"
                    ),
                    {"c": claimant},
                )
                .mappings()
                .first()
            )
        if page is not None:
            return dict(page)
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.2)
    raise AssertionError(f"the run worker {pid} was never caught holding a page")


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _run(stack: DagsterStack, run_id: str) -> dict:
    run = stack.graphql.run(run_id)
    assert run is not None, run_id
    return run


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def test_a_killed_run_worker_is_retried_as_a_resume_and_the_import_completes(stack: DagsterStack):
    graphql = stack.graphql
    bootstrap_id = graphql.launch_job(
        BOOTSTRAP_JOB,
        run_config={"ops": {BOOTSTRAP_OP: {"config": {"workers": 1, "page_size": PAGE_SIZE}}}},
    )
    assert graphql.wait_for_run(bootstrap_id, timeout=240)["status"] == "SUCCESS", stack.log_tail()
    [launched] = graphql.runs(tags={"pin/launched-by": bootstrap_id})
    run_id = launched["runId"]

    seen = wait_until(lambda: _in_flight_page(stack), 300, "a PropertyObjects page in flight")
    claimant = seen["claimed_by"]
    pid = int(claimant.rsplit(":", 1)[1])
    # the page's claimant is the run worker: the code server's child that runs the whole run (the
    # in-process executor), not the code server itself
    assert "spawn_main" in _cmdline(pid), _cmdline(pid)
    assert "api grpc" in _cmdline(_parent(pid)), _cmdline(_parent(pid))
    assert _run(stack, run_id)["status"] == "STARTED"
    quarantined = scalar(stack.engine, "SELECT count(*) FROM chessboard.talent_import_failed_items")
    victim = _frozen_in_a_page(stack, pid, claimant)
    os.kill(pid, signal.SIGKILL)
    killed_at = dt.datetime.now(dt.UTC)
    started = time.monotonic()

    killed = graphql.wait_for_run(run_id, timeout=60)
    assert killed["status"] == "FAILURE"
    # failed by the code server that started the worker (it watches its child), not by run monitoring
    crash = f"Run execution process for {run_id} was terminated by signal 9 (SIGKILL)"
    messages = graphql.run_messages(run_id)
    assert any(crash in m for m in messages), messages[-5:]

    # no click: the daemon launches the retry, a re-execution from failure of the killed run
    try:
        [retry] = wait_until(
            lambda: graphql.runs(tags={"dagster/parent_run_id": run_id}),
            RETRY_SECONDS,
            f"a retry of the killed run {run_id}",
        )
    except AssertionError:
        raise AssertionError(
            f"no retry of {run_id}: {_run(stack, run_id)['tags']}\n{stack.log_tail()}"
        ) from None
    retry_id = retry["runId"]
    tags = retry["tags"]
    assert retry["jobName"] == IMPORT_JOB
    assert tags["dagster/root_run_id"] == run_id
    assert tags["dagster/is_resume_retry"] == "true"
    assert tags["dagster/retry_number"] == "1"
    assert tags["pin/import"] == IMPORT_JOB and tags["pin/launched-by"] == bootstrap_id
    # the daemon tags the killed run with its retry right after creating it
    killed_tags = wait_until(
        lambda: (t := _run(stack, run_id)["tags"]).get("dagster/auto_retry_run_id") and t,
        30,
        "the killed run tagged with its retry",
    )
    assert (killed_tags["dagster/auto_retry_run_id"], killed_tags["dagster/will_retry"]) == (retry_id, "true")

    done = graphql.wait_for_run(retry_id, timeout=600)
    assert done["status"] == "SUCCESS", stack.log_tail()
    recovered_in = time.monotonic() - started

    # one import run, resumed by the retry: same correlation id (the root run), Completed
    with stack.engine.connect() as conn:
        imports = conn.execute(
            sa.text(
                "SELECT correlation_id, status, dagster_run_id, stage_counters FROM chessboard.talent_import_runs"
            )
        ).all()
        page = conn.execute(
            sa.text(
                "SELECT status, claimed_by, claimed_at FROM chessboard.talent_import_pages WHERE id = :id"
            ),
            {"id": victim["id"]},
        ).one()
        applied = conn.execute(
            sa.text(
                "SELECT sum(items_applied), sum(items_planned) FROM chessboard.talent_import_pages"
                " WHERE stage = 'PropertyObjects'"
            )
        ).one()
    [(correlation_id, status, dagster_run_id, counters)] = imports
    assert (correlation_id, status, dagster_run_id) == (run_id, "Completed", retry_id)
    po = counters["PropertyObjects"]
    assert (po["planned"], po["applied"], po["failed"]) == (OBJECTS, OBJECTS, 0), po
    # each page applied once: the pages' applied counters add up to the source's objects
    assert tuple(applied) == (OBJECTS, OBJECTS)
    # the dead worker's page was taken over by the retry's worker when it resumed, not after its lease
    assert page.status == "Done" and page.claimed_by != victim["claimed_by"]
    assert (page.claimed_at - killed_at).total_seconds() < RETRY_SECONDS

    report = invariants.check_all(stack.chessboard_url, SPEC, audit=False)
    report.add("applied once", invariants.applied_once(stack.chessboard_url))
    assert report.ok, str(report)
    assert (
        scalar(stack.engine, "SELECT count(*) FROM chessboard.talent_import_failed_items") == quarantined == 0
    )

    # the killed run and its one retry: nothing else was launched for the import
    group = graphql.runs(tags={"dagster/root_run_id": run_id})
    assert [r["runId"] for r in group] == [retry_id]
    print(f"killed run {run_id}, retry {retry_id} SUCCESS {recovered_in:.0f}s after the kill")

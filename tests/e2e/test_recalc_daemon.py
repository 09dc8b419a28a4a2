"""The recalc on the daemon path of the standard deployment (webserver + daemon, GraphQL), as
operations.md "Dagster surface" states it: a due row is drained within 2 s of its DueAt, a drain run
whose worker is SIGKILLed is marked failed and the sensor launches another, and the daily retention
job deletes old runs of the high-frequency jobs while import runs stay."""

from __future__ import annotations

import os
import re
import signal
import time
import uuid

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.recalc.definitions import JOB_NAME, SENSOR_NAME, UNTIL_TAG, until_of
from pin_chessboard_pipelines.defs.run_retention.definitions import JOB_NAME as RETENTION_JOB
from pin_chessboard_pipelines.defs.run_retention.definitions import SCHEDULE_NAME
from tests.support.dagster_stack import SHARED_STACK_GROUP
from tests.support.polling import wait_until
from tests.support.recalc_data import StoreBuilder, standard_project

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SHARED_STACK_GROUP)]

DUE_WITHIN_SECONDS = 2.0


def _projects(engine, count: int) -> list:
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        return [standard_project(b) for _ in range(count)]


def _request(engine, projects, due_in: list[float]) -> dict[uuid.UUID, float]:
    """Queue rows due `due_in` seconds from now; returns each row's DueAt (Unix time, DB clock)."""
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        for project, seconds in zip(projects, due_in, strict=True):
            b.request(project, due_in_seconds=seconds)
        rows = conn.execute(
            sa.text(
                "SELECT project_id, extract(epoch FROM due_at)::float8 FROM chessboard.project_recalc_requests "
                "WHERE project_id = ANY(CAST(:ids AS uuid[]))"
            ),
            {"ids": [str(p.id) for p in projects]},
        ).all()
    return {row[0]: row[1] for row in rows}


def _watch_drained(engine, due: dict[uuid.UUID, float], timeout: float) -> dict[uuid.UUID, float]:
    """Polls the queue every 20 ms; returns when (DB clock) each row left it."""
    drained: dict[uuid.UUID, float] = {}
    deadline = time.monotonic() + timeout
    with engine.connect() as conn:
        while len(drained) < len(due):
            assert time.monotonic() < deadline, (
                f"rows still queued after {timeout:.0f}s: {set(due) - set(drained)}"
            )
            with conn.begin():
                now, queued = conn.execute(
                    sa.text(
                        "SELECT extract(epoch FROM clock_timestamp())::float8, "
                        "array(SELECT project_id FROM chessboard.project_recalc_requests "
                        "      WHERE project_id = ANY(CAST(:ids AS uuid[])))"
                    ),
                    {"ids": [str(p) for p in due]},
                ).one()
            for project_id in set(due) - set(drained) - set(queued):
                drained[project_id] = now
            time.sleep(0.02)
    return drained


def _live_drain(dagster_stack, timeout: float = 120) -> dict:
    """A sensor-launched drain run that polls the queue for 15 s more at least: a row due now is
    drained, and again after the end of a run about to end (the tests' slots last 120 s)."""
    engine = dagster_stack.engine
    gql = dagster_stack.graphql
    for _ in range(3):
        (warm,) = _projects(engine, 1)
        _watch_drained(engine, _request(engine, [warm], [0]), timeout)
        runs = gql.runs(job_name=JOB_NAME, statuses=["STARTED"])
        ends = [until_of(r["tags"].get(UNTIL_TAG, "0")) for r in runs]
        live = [r for r, end in zip(runs, ends, strict=True) if end > time.time() + 15]
        if live:
            return live[0]
        last_end = max(ends, default=0.0)
        wait_until(lambda end=last_end: time.time() > end, timeout=20, what="the drain run's slot to end")
    raise AssertionError(f"no drain run with 15 s of life left: {runs}")


def test_the_daemon_drains_each_row_within_2s_of_its_due_at(dagster_stack):
    engine = dagster_stack.engine
    _live_drain(dagster_stack)
    projects = _projects(engine, 6)
    due = _request(engine, projects, [2.0 + 0.7 * i for i in range(6)])
    drained = _watch_drained(engine, due, timeout=60)
    delays = {p: drained[p] - due[p] for p in due}
    assert max(delays.values()) <= DUE_WITHIN_SECONDS, delays
    assert min(delays.values()) >= -0.05, delays  # nothing is taken before its DueAt
    ticks = dagster_stack.graphql.sensor_ticks(SENSOR_NAME)
    launched = [t for t in ticks if t["runIds"]]
    assert launched and all(re.fullmatch(r'\{"slot": \d+, "attempt": \d+\}', t["cursor"]) for t in launched)


def test_a_sigkilled_drain_worker_is_marked_failed_and_the_sensor_launches_again(dagster_stack):
    gql = dagster_stack.graphql
    with dagster_stack.instance() as instance:
        assert instance.run_monitoring_enabled
    run = _live_drain(dagster_stack)
    messages = gql.run_messages(run["runId"])
    (pid,) = {
        int(m) for text in messages for m in re.findall(r"Started process for run \(pid: (\d+)\)", text)
    }
    os.kill(pid, signal.SIGKILL)
    failed = gql.wait_for_run(run["runId"], timeout=90)
    assert failed["status"] == "FAILURE", failed
    engine = dagster_stack.engine
    projects = _projects(engine, 1)
    due = _request(engine, projects, [1.0])
    _watch_drained(engine, due, timeout=120)
    replacement = wait_until(
        lambda: [r for r in gql.runs(job_name=JOB_NAME, statuses=["STARTED"]) if r["runId"] != run["runId"]],
        timeout=30,
        what="a new drain run",
    )
    assert replacement[0]["tags"]["dagster/sensor_name"] == SENSOR_NAME
    # the sensor's run replaces it, not the daemon's run retry as well (dagster/max_retries: 0)
    assert gql.run(run["runId"])["tags"]["dagster/will_retry"] == "false"
    assert gql.runs(tags={"dagster/parent_run_id": run["runId"]}) == []


def test_the_retention_job_deletes_old_runs_of_the_frequent_jobs_and_keeps_imports(dagster_stack):
    import dagster as dg

    gql = dagster_stack.graphql
    schedule = gql.schedule(SCHEDULE_NAME)
    assert schedule["cronSchedule"] == "23 3 * * *" and schedule["scheduleState"]["status"] == "RUNNING"
    jobs = [
        "project_aggregates_recalc",
        "outbox_relay",
        "talent_sync",
        "chessboard_aggregates_audit",
        "talent_initial_import",
    ]
    old = {job: str(uuid.uuid4()) for job in jobs}
    recent = str(uuid.uuid4())
    with dagster_stack.instance() as instance:
        for job, run_id in [*old.items(), ("project_aggregates_recalc", recent)]:
            instance.add_run(dg.DagsterRun(job_name=job, run_id=run_id, status=dg.DagsterRunStatus.SUCCESS))
            instance.report_engine_event("a line of its log", instance.get_run_by_id(run_id))
    ids = ", ".join(f"'{run_id}'" for run_id in old.values())
    dagster_stack.dagster_sql(
        f"UPDATE runs SET create_timestamp = now() - interval '8 days' WHERE run_id IN ({ids})"
    )
    retention = gql.launch_job(RETENTION_JOB)
    assert gql.wait_for_run(retention)["status"] == "SUCCESS", gql.run_messages(retention)[-5:]
    left = {job for job, run_id in old.items() if gql.run(run_id) is not None}
    assert left == {"talent_initial_import"}
    assert gql.run(recent) is not None
    with dagster_stack.instance() as instance:
        assert not instance.all_logs(old["outbox_relay"])
        assert instance.all_logs(old["talent_initial_import"])

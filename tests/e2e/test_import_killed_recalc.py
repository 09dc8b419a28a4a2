"""SIGKILL of `pin-chessboard import` in the middle of its PropertyObjects stage: the recalc
requests the run held stay held at first (its run worker's heartbeat is fresh); once that
heartbeat is 90 s old the run counts as ended and a drain takes them all, within 4 minutes of the
kill and with nothing else done. The next `pin-chessboard import` then marks its Dagster run
failed (pool.py fail_runs_of_gone_imports), and the same import resumed completes
(docs/project-aggregates-recalc.md#held-requests)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.talent_import.pool import fail_runs_of_gone_imports
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import queue_status
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.engine import sqlalchemy_url, with_database
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.command_env import command_env
from tests.support.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.long]

SPEC = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=40, latency_ms=40)
DEBOUNCE, CAP = 600.0, 20.0  # a debounce longer than the test: only the cap makes them due
DRAINED_WITHIN = 240.0  # after the SIGKILL

# the CLI import of the test: small pages, one worker, so it is still running when killed
IMPORT = [
    sys.executable,
    "-m",
    "pin_chessboard_pipelines.cli",
    "import",
    "--page-size",
    "5",
    "--workers",
    "1",
]


def _scalar(engine, sql: str):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql)).scalar()


def test_a_killed_cli_imports_held_requests_are_drained_within_4_minutes_and_the_import_resumes(
    tmp_path: Path, db_url: str, engine, talent_sim, monkeypatch
):
    import dagster as dg

    sim = talent_sim(SPEC)
    env = command_env(
        db_url,
        tmp_path,
        dagster_home=tmp_path / "dagster_home",
        TALENT_API_URL=sim.url,
        CHESSBOARD_RECALC_DEBOUNCE_SECONDS=str(DEBOUNCE),
        CHESSBOARD_RECALC_CAP_SECONDS=str(CAP),
    )
    proc = subprocess.Popen(
        IMPORT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: (
                proc.poll() is not None
                or _scalar(
                    engine,
                    "SELECT count(*) FROM chessboard.talent_import_pages "
                    "WHERE stage = 'PropertyObjects' AND status = 'Done'",
                )
                >= 2
            ),
            180,
            "two PropertyObjects pages Done",
        )
        assert proc.poll() is None, "the import ended before it could be killed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the command and everything it started
        killed = time.monotonic()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    run_id = _scalar(engine, "SELECT id FROM chessboard.talent_import_runs WHERE status = 'Running'")
    assert run_id is not None  # what a SIGKILL leaves
    held = _scalar(
        engine, "SELECT count(*) FROM chessboard.project_recalc_requests WHERE import_run_id IS NOT NULL"
    )
    assert held >= 1
    with engine.begin() as conn:  # due long ago and past the cap: held anyway while the run is Running
        conn.execute(
            sa.text("UPDATE chessboard.project_recalc_requests SET due_at = now() - interval '1 second'")
        )
    with engine.connect() as conn:
        status = queue_status(conn, 5)
    assert (status.held, status.due) == (held, 0)
    assert drain(engine).recalculated == 0

    drained = {"n": 0}

    def empty() -> bool:
        drained["n"] += drain(engine).recalculated
        return _scalar(engine, "SELECT count(*) FROM chessboard.project_recalc_requests") == 0

    # nothing but the drain: the dead run worker's requests are released by its silence
    wait_until(empty, DRAINED_WITHIN - (time.monotonic() - killed), "the dead import's requests drained")
    assert time.monotonic() - killed < DRAINED_WITHIN
    assert drained["n"] == held
    assert _scalar(engine, "SELECT status FROM chessboard.talent_import_runs") == "Running"  # resumable

    # the next `pin-chessboard import` marks the gone run failed before anything else
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", sqlalchemy_url(with_database(db_url, "dagster")))
    instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
    try:
        failed = wait_until(
            lambda: fail_runs_of_gone_imports(instance, engine, debounce_seconds=DEBOUNCE, cap_seconds=CAP),
            60,
            "the killed import's Dagster run marked failed",
        )
        (dagster_run,) = failed
        assert instance.get_run_by_id(dagster_run).status == dg.DagsterRunStatus.FAILURE
    finally:
        instance.dispose()

    # and the same import, run again, resumes and completes it
    resumed = subprocess.run(
        IMPORT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=PROJECT_ROOT,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _scalar(engine, "SELECT string_agg(status, ',') FROM chessboard.talent_import_runs") == "Completed"

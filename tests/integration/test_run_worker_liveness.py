"""An import run holds its recalc requests while its run worker lives, whatever its steps do
(docs/store.md#held-requests, docs/talent-initial-import.md#pages-and-leases): a real Dagster run on the
multiprocess executor whose one step asks for a retry 150 s later, so for that time no step process
exists and nothing but the run worker can say the run still runs. Its requests stay held through
the gap (the steps' heartbeat is 120 s old by then); SIGKILL of the run worker releases them
within 4 minutes and a drain takes them."""

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

from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import queue_status, release_ended_import_requests
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from tests.support.polling import wait_until
from tests.support.replica import Tree, context_factory, pid

pytestmark = [pytest.mark.slow, pytest.mark.long]

GAP = 150.0  # the retry's delay: no step process meanwhile
HELD_FOR = 120.0  # how long the test watches the requests stay held in the gap
RELEASED_WITHIN = 240.0  # after the run worker's SIGKILL
DEBOUNCE, CAP, POISON = 1.0, 300.0, 5


def _scalar(engine, sql: str):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql)).scalar()


def _held(engine) -> int:
    with engine.connect() as conn:
        return queue_status(conn, POISON).held


def _sweep(engine) -> int:
    with engine.begin() as conn:
        return release_ended_import_requests(conn, debounce_seconds=DEBOUNCE, cap_seconds=CAP)


def test_a_run_worker_alive_between_steps_keeps_its_requests_held_and_its_sigkill_releases_them(
    tmp_path: Path, db_url: str, engine
):
    ctx = context_factory(engine)(run_id=None)
    trees = [Tree() for _ in range(3)]
    for tree in trees:
        tree.apply_parents(engine, ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    projects = [f"{pid('project', t.project)}:{pid('developer', t.developer)}" for t in trees]

    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHESSBOARD_", "DAGSTER_"))}
    env.update(
        CHESSBOARD_DATABASE_URL=db_url,
        DAGSTER_HOME=str(tmp_path),
        PYTHONPATH=str(PROJECT_ROOT),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.run_worker_job", str(GAP), *projects],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        wait_until(lambda: proc.poll() is not None or _held(engine) == 3, 120, "the import's requests held")
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        with engine.begin() as conn:  # due long ago: only the hold keeps them from the drain
            conn.execute(
                sa.text("UPDATE chessboard.project_recalc_requests SET due_at = now() - interval '1 s'")
            )

        started = time.monotonic()
        while time.monotonic() - started < HELD_FOR:
            released = _sweep(engine)
            assert released == 0, f"released {time.monotonic() - started:.0f} s into the step gap"
            assert _held(engine) == 3
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            time.sleep(5)
        steps_beat = _scalar(
            engine, "SELECT extract(epoch FROM now() - heartbeat_at) FROM chessboard.talent_import_runs"
        )
        assert steps_beat > 110  # no step renewed anything in the gap
        assert drain(engine).recalculated == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the run worker (and its forkserver)
        killed = time.monotonic()
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    assert _scalar(engine, "SELECT status FROM chessboard.talent_import_runs") == "Running"
    wait_until(lambda: _sweep(engine) == 3, RELEASED_WITHIN, "the dead run worker's requests released")
    assert time.monotonic() - killed < RELEASED_WITHIN
    assert _held(engine) == 0
    drained = {"n": 0}

    def empty() -> bool:
        drained["n"] += drain(engine).recalculated
        return _scalar(engine, "SELECT count(*) FROM chessboard.project_recalc_requests") == 0

    wait_until(empty, 30, "the released requests drained")
    assert drained["n"] == 3

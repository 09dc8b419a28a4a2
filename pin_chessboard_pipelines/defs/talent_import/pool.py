"""The import's pool (defs/pools.py): one import run at a time on every path
(docs/talent-initial-import.md#advisory-lock).

The run queue holds a second import launched from the UI, a backfill or GraphQL; the CLI runs in
its own process, outside the queue, so it waits here for the runs that hold the pool and then on
the advisory lock, both within CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS.
"""

import time
from collections.abc import Callable

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.defs.talent_import.config import POOL
from pin_chessboard_pipelines.recalc.queue import release_dagster_run_requests
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.lock import LOCK
from pin_chessboard_pipelines.talent_import.model import ImportOptions

ALIVE_SECONDS = ImportOptions.alive_seconds

# A run past these renews its import run's heartbeat while one of its processes lives.
STARTED = (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING)

HOLDING = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def import_runs_holding_pool(instance: dg.DagsterInstance, exclude: str | None = None) -> list[dg.DagsterRun]:
    """Runs that use the import pool and have left the queue (they hold it until they end)."""
    return [
        run
        for run in instance.get_runs(filters=dg.RunsFilter(statuses=HOLDING))
        if run.run_id != exclude
        and run.run_op_concurrency is not None
        and POOL in (run.run_op_concurrency.all_pools or ())
    ]


def fail_runs_of_gone_imports(
    instance: dg.DagsterInstance,
    engine: Engine,
    *,
    debounce_seconds: float,
    cap_seconds: float,
    alive_seconds: float = ALIVE_SECONDS,
) -> list[str]:
    """Marks failed the started import runs whose run worker is gone (SIGKILL, a lost host): it
    renewed no heartbeat of its import run for `alive_seconds` (talent_import/run_worker.py; a run
    younger than that may not have written its row yet), or its process held the import lock and
    nobody holds it now. Run
    monitoring does the same for runs the daemon launched; this catches the runs of a killed
    `pin-chessboard import`. Their held recalc requests become due by the debounce and the cap
    (docs/store.md#held-requests). Returns their ids."""
    started = [run for run in import_runs_holding_pool(instance) if run.status in STARTED]
    if not started:
        return []
    with engine.connect() as conn:
        running = runs.running_correlation_ids(conn, alive_seconds, lock_free=LOCK.holder_pid(conn) is None)
    now = time.time()

    def is_gone(run: dg.DagsterRun) -> bool:
        alive = running.get(run.root_run_id or run.run_id)
        if alive is not None:
            return not alive
        record = instance.get_run_record_by_id(run.run_id)  # no Running row: young runs may not have one yet
        return record is not None and (record.start_time or now) < now - alive_seconds

    gone = [run for run in started if is_gone(run)]
    for run in gone:
        instance.report_run_failed(
            run,
            f"the import's run worker is gone: no heartbeat of its import run for {alive_seconds:g} s, "
            "or the import lock it held is free",
        )
    with engine.begin() as conn:
        release_dagster_run_requests(
            conn, [run.run_id for run in gone], debounce_seconds=debounce_seconds, cap_seconds=cap_seconds
        )
    return [run.run_id for run in gone]


def wait_for_import_pool(
    instance: dg.DagsterInstance,
    timeout: float,
    *,
    poll_seconds: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[dg.DagsterRun]:
    """Waits at most `timeout` seconds until no run holds the pool; returns the runs still holding it."""
    deadline = clock() + timeout
    while True:
        holding = import_runs_holding_pool(instance)
        if not holding or clock() >= deadline:
            return holding
        sleep(min(poll_seconds, max(0.0, deadline - clock())))

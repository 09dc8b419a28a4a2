"""The import's pool (dagster.yaml `concurrency.pools`, granularity run): one import run at a time
on every path (docs/talent-initial-import.md#advisory-lock).

The run queue holds a second import launched from the UI, a backfill or GraphQL; the CLI runs in
its own process, outside the queue, so it waits here for the runs that hold the pool and then on
the advisory lock, both within CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS.
"""

import time
from collections.abc import Callable

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.config import POOL

HOLDING = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def ensure_import_pool(instance: dg.DagsterInstance) -> None:
    """Sets the pool's limit (dagster.yaml's default_limit) before a run needs it: the queue only
    holds runs back on pools it already knows, so two imports queued on a fresh instance would
    otherwise both start."""
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits and POOL not in storage.get_concurrency_keys():
        storage.initialize_concurrency_limit_to_default(POOL)


def import_runs_holding_pool(instance: dg.DagsterInstance, exclude: str | None = None) -> list[dg.DagsterRun]:
    """Runs that use the import pool and have left the queue (they hold it until they end)."""
    return [
        run
        for run in instance.get_runs(filters=dg.RunsFilter(statuses=HOLDING))
        if run.run_id != exclude
        and run.run_op_concurrency is not None
        and POOL in (run.run_op_concurrency.all_pools or ())
    ]


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

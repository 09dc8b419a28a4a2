"""What the sensor-driven singleton jobs (recalc drain, outbox relay, talent sync) share: one run
at a time, and termination that stops between units of work instead of inside one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg

# dagster.yaml limits runs with this tag to one per value (run coordinator).
SINGLETON_TAG = "pin/singleton"

IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def active_run(instance: dg.DagsterInstance, job_name: str) -> dg.DagsterRun | None:
    """A run of the job that is queued or in flight, if any (a sensor then requests none)."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name=job_name, statuses=IN_PROGRESS), limit=1)
    return runs[0] if runs else None


@contextmanager
def graceful_interrupts() -> Iterator[Callable[[], bool]]:
    """Run termination (SIGINT/SIGTERM) is captured and polled by the loop between units of work,
    so the unit in flight commits or rolls back whole."""
    try:
        from dagster._utils.interrupts import capture_interrupts, check_captured_interrupt
    except ImportError:  # pragma: no cover - a Dagster without the helper: interrupts stay abrupt
        yield lambda: False
        return
    with capture_interrupts():
        yield check_captured_interrupt

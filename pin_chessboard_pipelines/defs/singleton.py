"""What the sensor-driven singleton jobs (recalc drain, outbox relay, talent sync) share: one run
at a time, the sensors' run request, and termination that stops between units of work instead of
inside one."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import dagster as dg

from pin_chessboard_pipelines.defs.declare import one_op_job

# dagster.yaml limits runs with this tag to one per value (run coordinator).
SINGLETON_TAG = "pin/singleton"
# Tags of a job whose sensor already launches the next run when one fails: the daemon's run retries
# (dagster.yaml `run_retries`) leave its runs alone, so a dead worker's run is followed by one run,
# the sensor's, not by a retry beside it (docs/deployment.md#run-retries).
NO_RUN_RETRIES = {"dagster/max_retries": "0"}


def singleton_job(name: str, op: dg.OpDefinition, singleton_value: str, description: str) -> dg.JobDefinition:
    """The one-op job of a sensor-started singleton: one run at a time per `singleton_value`, no run
    retries (its sensor starts the next run)."""
    return one_op_job(name, op, description, tags={SINGLETON_TAG: singleton_value, **NO_RUN_RETRIES})


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


def skip_while_active(
    context: dg.SensorEvaluationContext, job_name: str, waiting: str
) -> dg.SkipReason | None:
    """A skip naming the job's queued or running run (`{waiting} {run id} is {status}`), else None."""
    active = active_run(context.instance, job_name)
    if active is None:
        return None
    return dg.SkipReason(f"{waiting} {active.run_id} is {active.status.value}")


def singleton_run_request(
    key_prefix: str, singleton_value: str, now: float, tags: dict[str, str]
) -> dg.SensorResult:
    """One run request tagged for the singleton run queue, `tags` saying why it runs. The run key
    dedupes a tick evaluated twice; no cursor: nothing of it is read on the next tick."""
    run_key = f"{key_prefix}:{int(now * 1000)}"
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=run_key, tags={SINGLETON_TAG: singleton_value, **tags})]
    )


# the signals of a run's termination: Dagster sends SIGINT, Kubernetes and the run monitor SIGTERM
TERMINATION_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def graceful_interrupts() -> Iterator[Callable[[], bool]]:
    """Run termination (SIGINT/SIGTERM) is captured and polled by the loop between units of work,
    so the unit in flight commits or rolls back whole. Inside the block the signals only set a flag;
    after it, Dagster's own handlers (raising DagsterExecutionInterruptedError) are back. Off the main
    thread, where Python delivers no signal, the loop is never told to stop."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    received = threading.Event()

    def capture(signum: int, frame: object) -> None:
        received.set()

    previous = {signum: signal.getsignal(signum) for signum in TERMINATION_SIGNALS}
    for signum in TERMINATION_SIGNALS:
        signal.signal(signum, capture)
    try:
        yield received.is_set
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(signum, handler)

"""How the project declares its Dagster jobs, sensors and schedules, once: a job of one op runs in
the run's own process; every sensor and schedule is on from the start (the daemon runs them without
a click), and a daily schedule keeps UTC days."""

from collections.abc import Callable
from typing import Any

import dagster as dg

# what a sensor's tick decides: run requests (and asset events, a cursor) or why it skipped
SensorTick = dg.SensorResult | dg.SkipReason


def one_op_job(
    name: str,
    op: dg.OpDefinition,
    description: str,
    tags: dict[str, str] | None = None,
    config: dict[str, Any] | None = None,
) -> dg.JobDefinition:
    """The job that runs `op`, in the run's process (its op holds the loop, nothing to fan out)."""

    launchpad: dict[str, Any] = {} if config is None else {"config": config}  # its default run config

    @dg.job(name=name, description=description, executor_def=dg.in_process_executor, tags=tags, **launchpad)
    def job() -> None:
        op()

    return job


def running_sensor(
    name: str, seconds: int, job_name: str | None = None
) -> Callable[[Callable[..., Any]], dg.SensorDefinition]:
    """The decorator of a sensor that ticks every `seconds`, running from the start; its function's
    docstring is the description the UI shows."""

    def declare(evaluate: Callable[..., Any]) -> dg.SensorDefinition:
        return dg.sensor(
            name=name,
            job_name=job_name,
            minimum_interval_seconds=seconds,
            default_status=dg.DefaultSensorStatus.RUNNING,
            description=" ".join((evaluate.__doc__ or "").split()),
        )(evaluate)

    return declare


def utc_schedule(
    name: str,
    job: Any,  # a JobDefinition or what define_asset_job returns
    cron: str,
    description: str,
    execution_fn: Callable[[dg.ScheduleEvaluationContext], dg.RunRequest] | None = None,
) -> dg.ScheduleDefinition:
    """A schedule of `job` at `cron` in UTC, running from the start; `execution_fn`: its run request
    (default: one run with the job's own config)."""
    return dg.ScheduleDefinition(
        name=name,
        job=job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=description,
        execution_fn=execution_fn,
    )

"""Running a job from the command line through the Dagster instance in DAGSTER_HOME, so the run
shows up in the UI's history exactly like a sensor-launched one."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from pin_chessboard_pipelines.defs.in_process import execute_as_launched
from pin_chessboard_pipelines.errors import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    IMPORT_DISABLED,
    IMPORT_INVALID_REQUEST,
    IMPORT_LOCK_HELD,
    IMPORT_SOURCE_UNAVAILABLE,
    KAFKA_REFUSED,
)
from pin_chessboard_pipelines.kafka_env import redact_kafka_secrets
from pin_chessboard_pipelines.runtime.services import prepare_dagster_home
from pin_chessboard_pipelines.settings import Settings, load_settings

# A job's failure that is a refusal (README.md#commands: exit 2)
REFUSALS = (
    IMPORT_LOCK_HELD,
    IMPORT_DISABLED,
    IMPORT_SOURCE_UNAVAILABLE,
    IMPORT_INVALID_REQUEST,
    KAFKA_REFUSED,
)
# A step's error as Dagster serialises it: `package.module.ErrorClass: message`.
_ERROR_CLASS = re.compile(r"^[\w.]+: (?=CHESSBOARD_)")

# Operators read the project's own log lines; Dagster's step-by-step DEBUG events stay in the UI.
CONSOLE_LOGGER = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


def run_job(
    job_name: str,
    op_name: str | Sequence[str],
    op_config: dict[str, Any],
    settings: Settings | None = None,
    run_config: dict[str, Any] | None = None,
) -> int:
    """Runs the job on the instance with the job's executor; prints one JSON line
    {runId, status, **summary} (the op's `summary` metadata, or the error of its failure) and
    returns the exit code. Several op names: each gets `op_config`, all of them at once, and the
    summary is theirs merged (`merge_summaries`), every step of an op mapped over a dynamic output
    counted. `run_config`: the run's config instead of that (its ops, its execution).

    Every job runs as the UI would launch it (`execute_as_launched`): with the code location's
    origin and the job's snapshot, so the run is listed under its job and on the timeline, and the
    UI re-executes it without a "different version" warning. On the in-process executor its steps
    run in this process; on any other (the recalc drains and the audit under
    CHESSBOARD_DAGSTER_EXECUTOR=multiprocess) in processes of their own."""
    import dagster as dg

    from pin_chessboard_pipelines.defs.fan_out import concurrent_steps_config

    names = [op_name] if isinstance(op_name, str) else list(op_name)
    prepare_dagster_home(settings or load_settings())
    from pin_chessboard_pipelines.definitions import build_definitions

    job = build_definitions().resolve_job_def(job_name)
    if run_config is None:
        ops = {"ops": {name: {"config": op_config} for name in names}}
        run_config = {**ops, **concurrent_steps_config(len(names), job.executor_def.name)}
    from pin_chessboard_pipelines.defs.singleton import NO_RUN_RETRIES

    # this process is the run worker: a killed command is run again, the daemon does not retry it
    tags = {"pin/trigger": "cli", **NO_RUN_RETRIES}
    with dg.DagsterInstance.get() as instance:
        result = execute_as_launched(
            instance,
            job_name,
            run_config={**CONSOLE_LOGGER, **run_config},
            tags=tags,
        )
        summary = merge_summaries([step for name in names for step in step_summaries(result, name)])
    status = "Completed" if result.success else "Failed"
    print(json.dumps({"runId": result.run_id, "status": status, **summary}, ensure_ascii=False, default=str))
    if result.success:
        return EXIT_OK
    error = redact_kafka_secrets(
        _ERROR_CLASS.sub("", str(summary.get("error") or f"see the run {result.run_id}"))
    )
    if error.startswith(REFUSALS):  # refused (lock held, flag off, source unavailable): exit 2
        print(error, file=sys.stderr)
        return EXIT_REFUSED
    print(f"{job_name} failed: {error}", file=sys.stderr)  # the last line of stderr: the cause, once
    return EXIT_FAILED


def merge_summaries(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary of several steps: numbers (and dicts of numbers) summed, a value the steps
    agree on kept, others listed per step (e.g. why each drain stopped); the first error."""
    if len(summaries) == 1:
        return summaries[0]
    merged: dict[str, Any] = {}
    for key in dict.fromkeys(k for summary in summaries for k in summary):
        values = [summary[key] for summary in summaries if key in summary]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            merged[key] = sum(values)
        elif all(isinstance(v, dict) for v in values):
            merged[key] = merge_summaries(values)
        elif key == "error":
            merged[key] = next((v for v in values if v), values[0])
        elif all(v == values[0] for v in values):
            merged[key] = values[0]
        else:
            merged[key] = values
    return merged


def step_summaries(result: Any, op_name: str) -> list[dict[str, Any]]:
    """The `summary` of each step of the op (several when it is mapped over a dynamic output)."""
    by_step: dict[str, list[Any]] = {}
    for event in result.events_for_node(op_name):
        by_step.setdefault(event.step_key, []).append(event)
    return [_summary(events) for events in by_step.values()] or [{}]


def _summary(events: Any) -> dict[str, Any]:
    """A step's `summary` metadata, from its output or from its failure (with the error)."""
    for event in events:
        if event.is_successful_output:
            metadata = event.step_output_data.metadata
            if "summary" in metadata:
                return dict(metadata["summary"].value)
        elif event.is_step_failure:
            failure = event.step_failure_data
            if failure.user_failure_data is not None:
                metadata = failure.user_failure_data.metadata or {}
                summary = dict(metadata["summary"].value) if "summary" in metadata else {}
                return {**summary, "error": failure.user_failure_data.description}
            return {"error": _cause(failure.error)}
    return {}


def _cause(error: Any) -> str:
    """The first line of the innermost cause of a step's error (the driver's message, not
    Dagster's wrapper)."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    lines = [line for line in (error.message or "").strip().splitlines() if line.strip()]
    return lines[0] if lines else error.cls_name or "error"

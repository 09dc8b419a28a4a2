"""Running a job from the command line through the Dagster instance in DAGSTER_HOME, so the run
shows up in the UI's history exactly like a sensor-launched one."""

from __future__ import annotations

import json
from typing import Any

from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK
from pin_chessboard_pipelines.runtime.services import prepare_dagster_home
from pin_chessboard_pipelines.settings import Settings, load_settings

# Operators read the project's own log lines; Dagster's step-by-step DEBUG events stay in the UI.
CONSOLE_LOGGER = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


def run_job(
    job_name: str,
    op_name: str,
    op_config: dict[str, Any],
    settings: Settings | None = None,
) -> int:
    """Runs the job in process on the instance; prints one JSON line {runId, status, **summary}
    (the op's `summary` metadata, or the error of its failure) and returns the exit code."""
    import dagster as dg

    prepare_dagster_home(settings or load_settings())
    from pin_chessboard_pipelines.definitions import build_definitions

    job = build_definitions().resolve_job_def(job_name)
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance,
            run_config={**CONSOLE_LOGGER, "ops": {op_name: {"config": op_config}}},
            tags={"pin/trigger": "cli"},
            raise_on_error=False,
        )
        summary = op_summary(result, op_name)
    status = "Completed" if result.success else "Failed"
    print(json.dumps({"runId": result.run_id, "status": status, **summary}, ensure_ascii=False, default=str))
    return EXIT_OK if result.success else EXIT_FAILED


def op_summary(result: Any, op_name: str) -> dict[str, Any]:
    """The op's `summary` metadata, from its output or from its failure (with the error)."""
    for event in result.events_for_node(op_name):
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
            return {"error": failure.error.message.strip().splitlines()[0]}
    return {}

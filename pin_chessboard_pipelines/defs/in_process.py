"""A job of the code location run in this process as the UI would launch it (the CLI's commands,
the import launcher's run here)."""

from __future__ import annotations

import os
import sys
from typing import Any

DEFINITIONS_MODULE = "pin_chessboard_pipelines.definitions"
CODE_LOCATION = "pin_chessboard_pipelines"  # workspace.yaml's location_name


def execute_as_launched(
    instance: Any,
    job_name: str,
    *,
    run_id: str | None = None,
    run_config: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
) -> Any:
    """Runs a job of the code location in this process as the UI would launch it: with the
    location's origin (the run is listed under its job, and "Re-execute" in the UI runs the same
    definitions), and with the definitions' executor (steps in OS processes with multiprocess, pods
    with k8s). Returns Dagster's JobExecutionResult."""
    from pin_chessboard_pipelines.defs import dagster_private as private

    repository = private.ReconstructableRepository.for_module(DEFINITIONS_MODULE, "defs", os.getcwd())
    recon_job = repository.get_reconstructable_job(job_name)
    job_def = recon_job.get_definition()
    origin = private.RemoteJobOrigin(
        private.RemoteRepositoryOrigin(
            private.ManagedGrpcPythonEnvCodeLocationOrigin(
                private.LoadableTargetOrigin(executable_path=sys.executable, module_name=DEFINITIONS_MODULE),
                CODE_LOCATION,
            ),
            repository.get_definition().name,
        ),
        job_name,
    )
    run = instance.create_run_for_job(
        job_def=job_def,
        run_id=run_id,
        run_config=run_config,
        tags=tags,
        remote_job_origin=origin,
        job_code_origin=recon_job.get_python_origin(),
    )
    return private.execute_run(recon_job, run, instance, raise_on_error=False)

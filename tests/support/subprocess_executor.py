"""A step-delegating executor whose step handler starts every step as a plain OS process: the code
path of dagster-k8s's `k8s_job_executor` (one `dagster api execute_step` per step, its arguments
in the environment, steps watched and terminated by the handler) without a cluster.

How to run one of the project's jobs through it (a real Dagster run, every step a subprocess):

    from dagster import execute_job, instance_for_test
    from tests.support.subprocess_executor import reconstructable_project_job, step_pids

    with instance_for_test() as instance:  # steps need an instance on disk, not an ephemeral one
        result = execute_job(
            reconstructable_project_job("talent_initial_import"),
            instance=instance,
            run_config={...},  # the job's own run config; `execution: config:` takes the keys below
            tags={...},
        )
        step_pids(instance, result.run_id)  # {step_key: pid of the process that ran it}

The steps read their configuration from the environment, as pods do: set CHESSBOARD_DATABASE_URL
and the others (monkeypatch.setenv) before execute_job. Executor config (all optional):
`max_concurrent` (steps at once, default unlimited as on Kubernetes), `check_step_health_interval_seconds`
(default 1), `env` (extra variables for the step processes only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
from dagster import (
    DagsterEvent,
    DagsterEventType,
    build_reconstructable_job,
    multiple_process_executor_requirements,
)

from tests.support.dagster_private import (
    CheckStepHealthResult,
    EngineEventData,
    ReconstructableJob,
    RetryMode,
    StepDelegatingExecutor,
    StepHandler,
    StepHandlerContext,
)

ROOT = Path(__file__).resolve().parents[2]


class SubprocessStepHandler(StepHandler):
    """Launches each step as `python -m dagster api execute_step` with the step's arguments in
    DAGSTER_COMPRESSED_EXECUTE_STEP_ARGS, as K8sStepHandler puts them into the step Job's pod."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__()
        self._env = dict(env or {})
        self._processes: dict[str, subprocess.Popen] = {}

    @property
    def name(self) -> str:
        return "SubprocessStepHandler"

    @staticmethod
    def _step_key(context: StepHandlerContext) -> str:
        (step_key,) = context.execute_step_args.step_keys_to_execute or []
        return step_key

    def launch_step(self, step_handler_context: StepHandlerContext) -> Iterator[DagsterEvent]:
        step_key = self._step_key(step_handler_context)
        args = step_handler_context.execute_step_args
        env = {
            **os.environ,
            **self._env,
            **{item["name"]: item["value"] for item in args.get_command_env()},
            "DAGSTER_RUN_JOB_NAME": step_handler_context.dagster_run.job_name,
            "DAGSTER_RUN_STEP_KEY": step_key,
        }
        # the job is rebuilt from this module (tests.support...): the checkout's root on the path,
        # as the image has the package installed
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        command = list(args.get_command_args(skip_serialized_namedtuple=True))
        if command[0] == "dagster":  # the image's entry point in a pod; this interpreter's here
            command[:1] = [sys.executable, "-m", "dagster"]
        process = subprocess.Popen(command, env=env)
        self._processes[step_key] = process
        yield DagsterEvent.step_worker_starting(
            step_handler_context.get_step_context(step_key),
            message=f'Executing step "{step_key}" in process {process.pid}.',
            metadata={"pid": dg.MetadataValue.int(process.pid)},
        )

    def check_step_health(self, step_handler_context: StepHandlerContext) -> CheckStepHealthResult:
        step_key = self._step_key(step_handler_context)
        process = self._processes.get(step_key)
        if process is None:
            return CheckStepHealthResult.unhealthy(reason=f"no process was started for step {step_key}")
        code = process.poll()
        if code is not None and code != 0:
            # the step's process died before it reported the end of the step (SIGKILL, a crash)
            return CheckStepHealthResult.unhealthy(
                reason=f"the process {process.pid} of step {step_key} exited with code {code}"
            )
        return CheckStepHealthResult.healthy()

    def terminate_step(self, step_handler_context: StepHandlerContext) -> Iterator[DagsterEvent]:
        step_key = self._step_key(step_handler_context)
        process = self._processes.get(step_key)
        if process is not None and process.poll() is None:
            yield DagsterEvent.engine_event(
                step_handler_context.get_step_context(step_key),
                message=f"Terminating the process {process.pid} of step {step_key}",
                event_specific_data=EngineEventData(),
            )
            process.send_signal(signal.SIGTERM)


@dg.executor(
    name="subprocess_steps",
    config_schema={
        "max_concurrent": dg.Field(dg.Noneable(int), is_required=False, default_value=None),
        "check_step_health_interval_seconds": dg.Field(int, is_required=False, default_value=1),
        "env": dg.Field(dg.Map(str, str), is_required=False, default_value={}),
    },
    requirements=multiple_process_executor_requirements(),
)
def subprocess_step_executor(init_context: dg.InitExecutorContext) -> StepDelegatingExecutor:
    config = init_context.executor_config
    return StepDelegatingExecutor(
        SubprocessStepHandler(env=config["env"]),
        retries=RetryMode.DISABLED,
        max_concurrent=config["max_concurrent"],
        check_step_health_interval_seconds=config["check_step_health_interval_seconds"],
    )


def project_job(job_name: str) -> dg.JobDefinition:
    """The job `job_name` of the project's definitions (definitions.py), its steps run by
    subprocess_step_executor. Every step process rebuilds it from these arguments."""
    from pin_chessboard_pipelines.definitions import build_definitions

    return build_definitions().resolve_job_def(job_name).with_executor_def(subprocess_step_executor)


def reconstructable_project_job(job_name: str) -> ReconstructableJob:
    """project_job(job_name) as `dagster api execute_step` finds it again in another process."""
    return build_reconstructable_job(
        __name__, project_job.__name__, reconstructable_kwargs={"job_name": job_name}
    )


def step_pids(instance: dg.DagsterInstance, run_id: str) -> dict[str, int]:
    """{step key: pid} of the processes that started the run's steps (their STEP_START events)."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_START).records
    return {
        record.event_log_entry.step_key: record.event_log_entry.dagster_event.pid
        for record in records
        if record.event_log_entry.step_key and record.event_log_entry.dagster_event
    }

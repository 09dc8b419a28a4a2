"""Dagster's private names the tests rely on, imported here and nowhere else in tests/: a Dagster
upgrade that moves one breaks this module only. Each name has one comment line above it saying which
test uses it for what, where no public route does (tests/unit/test_dagster_private.py
keeps the list and the rest of tests/ clean)."""

from __future__ import annotations

from dagster._config import (
    # k8s_probe: the k8s executor's config processed as Dagster does before it builds the executor
    process_config,
    # k8s_probe: the executor's config schema as the config type process_config takes
    resolve_to_config_type,
)
from dagster._core.definitions.reconstruct import (
    # subprocess_executor: what build_reconstructable_job returns, the job a step process loads again
    ReconstructableJob,
    # k8s_probe: the recalc job loaded from the definitions module, its origin the step Job's command
    ReconstructableRepository,
)
from dagster._core.events import (
    # subprocess_executor: the engine event of a step's process terminated by its handler
    EngineEventData,
    # test_run_retries: a run failed with a given reason, as the code server or run monitoring reports it
    JobFailureData,
    # test_run_retries: the reasons a run fails (a dead worker, a start timeout, a failed step)
    RunFailureReason,
)

# k8s_probe: the execution plan whose step the K8sStepHandler turns into a Job
from dagster._core.execution.api import create_execution_plan
from dagster._core.execution.context.system import (
    # k8s_probe: the plan data of the orchestration context a step handler gets in a run
    PlanData,
    # k8s_probe: the orchestration context a step handler gets in a run, built without launching one
    PlanOrchestrationContext,
)

# k8s_probe: the orchestration context's log manager, without a running job
from dagster._core.execution.context_creation_job import create_context_free_log_manager
from dagster._core.execution.retries import (
    # k8s_probe, subprocess_executor: the retry mode a step-delegating executor and its plan take
    RetryMode,
    # test_run_retries: the retry daemon's own decision for a failed run on the instance dagster.yaml configures
    auto_reexecution_should_retry_run,
)
from dagster._core.executor.step_delegating import (
    # subprocess_executor: the step handler's health answer, the contract K8sStepHandler implements
    CheckStepHealthResult,
    # subprocess_executor: the executor k8s_job_executor is, run here with a subprocess step handler
    StepDelegatingExecutor,
    # subprocess_executor: the base class of K8sStepHandler, implemented with OS processes
    StepHandler,
    # k8s_probe, subprocess_executor: the context a step handler launches, checks and ends a step with
    StepHandlerContext,
)

# test_cli_logging: the attribute Dagster's log manager puts on a record, which the CLI's filter relies on
from dagster._core.log_manager import LOG_RECORD_METADATA_ATTR

# k8s_probe: a run with a code origin of the test's choosing, as the run launcher creates one in a deployment
from dagster._core.test_utils import create_run_for_test

# test_import_max_runtime: the run monitor's max-runtime check on one run, without the daemon's loop
from dagster._daemon.monitoring.run_monitoring import check_run_timeout

# k8s_probe: the step arguments K8sStepHandler writes into the step Job's pod
from dagster._grpc.types import ExecuteStepArgs

__all__ = [
    "LOG_RECORD_METADATA_ATTR",
    "CheckStepHealthResult",
    "EngineEventData",
    "ExecuteStepArgs",
    "JobFailureData",
    "PlanData",
    "PlanOrchestrationContext",
    "ReconstructableJob",
    "ReconstructableRepository",
    "RetryMode",
    "RunFailureReason",
    "StepDelegatingExecutor",
    "StepHandler",
    "StepHandlerContext",
    "auto_reexecution_should_retry_run",
    "check_run_timeout",
    "create_context_free_log_manager",
    "create_execution_plan",
    "create_run_for_test",
    "process_config",
    "resolve_to_config_type",
]

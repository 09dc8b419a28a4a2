"""The executor of the import and recalc jobs, chosen by CHESSBOARD_DAGSTER_EXECUTOR when the
definitions load (docs/deployment.md#executors): Dagster's own executors, configured by run config.

- `in_process`: every step in the run's process, one after another.
- `multiprocess`: every step in its own OS process (`execution: config: max_concurrent: N` in the
  run config; Dagster's default is the number of CPUs). The processes start from a forkserver that
  imported the definitions once per run, not by `spawn` (Dagster's default), which imports them
  again in every step (benchmarks/step_start_bench.py); `start_method: spawn: {}` in the run
  config brings `spawn` back.
- `k8s`: dagster-k8s's `k8s_job_executor`, one Kubernetes Job per step (the extra `[k8s]`);
  `execution: config:` takes its `job_namespace`, `env_secrets`, `step_k8s_config`, ...

Whichever it is, the run worker of an import run (the process that executes the run: the CLI, the
run pod, the multiprocess parent) beats for its import run while the run's plan executes
(`with_run_worker_heartbeat`, talent_import/run_worker.py): the run is alive while its run worker
is, whatever its steps do.

Before it, a re-execution of an import whose import run has Completed (a second "Re-execute from
failure") is refused: no step starts, the run ends Success with the tag `pin/refused` and one
warning line saying why, and the stages' assets and checks keep the status they had (a failed run
would mark every partition it planned Failed). A terminated import whose stopped step failed with
its `cancelled:` line ends CANCELED without the interrupt's stack trace (`cancelled_cleanly`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.config import IMPORT_JOB, IMPORT_TAG, REFUSED_TAG
from pin_chessboard_pipelines.defs.talent_import.session import re_execution_refusal
from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.settings import DAGSTER_EXECUTORS, load_dagster_executor, load_settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent_import.run_worker import RunWorkerHeartbeat

K8S_EXTRA_MISSING = "CHESSBOARD_DAGSTER_EXECUTOR=k8s needs dagster-k8s: install pin_chessboard_pipelines[k8s]"


def build_executor(name: str | None = None) -> dg.ExecutorDefinition:
    """The executor named `name` (default: CHESSBOARD_DAGSTER_EXECUTOR); ConfigError when the
    name is not one of settings.DAGSTER_EXECUTORS or dagster-k8s is not installed."""
    name = load_dagster_executor() if name is None else name
    if name == "in_process":
        return with_run_worker_heartbeat(dg.in_process_executor)
    if name == "multiprocess":
        return with_run_worker_heartbeat(MULTIPROCESS_EXECUTOR)
    if name == "k8s":
        try:
            from dagster_k8s import k8s_job_executor  # the extra [k8s]: not needed elsewhere
        except ImportError:
            raise ConfigError(K8S_EXTRA_MISSING) from None
        return with_run_worker_heartbeat(k8s_job_executor)
    expected = " | ".join(DAGSTER_EXECUTORS)
    raise ConfigError(f"CHESSBOARD_DAGSTER_EXECUTOR={name!r} is invalid: expected {expected}")


def forkserver_by_default(config: dict[str, Any]) -> dict[str, Any]:
    """The multiprocess executor's config with `start_method: forkserver` unless the run config
    chose one. The forkserver preloads the job's module (the definitions), so a step process starts
    with it imported."""
    return config if config.get("start_method") else {**config, "start_method": {"forkserver": {}}}


# Dagster's multiprocess executor, same name and run config (its own schema), forkserver by default
MULTIPROCESS_EXECUTOR = dg.multiprocess_executor.configured(
    forkserver_by_default, config_schema=dg.multiprocess_executor.config_schema.as_field()
)


def is_import_run(run: dg.DagsterRun) -> bool:
    """Every import run carries the import tag, whatever launched it (the job, an asset job, a backfill)."""
    return run.tags.get(IMPORT_TAG) == IMPORT_JOB


class RunWorkerExecutor(dg.Executor):
    """`inner`, with the run worker's heartbeat of an import run around the run's plan: the thread
    beats in the process that orchestrates the steps (the run worker), for as long as the plan
    executes, wherever the steps run."""

    def __init__(self, inner: dg.Executor, applies: Callable[[dg.DagsterRun], bool]) -> None:
        self.inner = inner
        self.applies = applies

    def execute(self, plan_context: Any, execution_plan: Any) -> Iterator[dg.DagsterEvent]:
        run = plan_context.dagster_run
        url = load_settings().database_url if self.applies(run) else None
        if url is None:  # not an import, or no store named by the environment: the steps' heartbeat
            yield from self.inner.execute(plan_context, execution_plan)
            return
        engine = get_engine(url)
        try:
            refusal = re_execution_refusal(plan_context.instance, run, engine)
            if refusal is not None:  # no step starts: nothing is planned Failed, nothing written
                plan_context.instance.add_run_tags(run.run_id, {REFUSED_TAG: refusal})
                plan_context.log.warning(refusal)
                return
            with RunWorkerHeartbeat(engine, run.run_id):
                yield from cancelled_cleanly(plan_context, self.inner.execute(plan_context, execution_plan))
        finally:
            engine.dispose()

    @property
    def retries(self) -> Any:
        return self.inner.retries

    @property
    def step_dependency_config(self) -> Any:
        return self.inner.step_dependency_config

    def get_step_event_or_retry_event(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_step_event_or_retry_event(*args, **kwargs)


INTERRUPTS = (dg.DagsterExecutionInterruptedError, KeyboardInterrupt)


def cancelled_cleanly(plan_context: Any, events: Iterator[dg.DagsterEvent]) -> Iterator[dg.DagsterEvent]:
    """The plan's events; a terminate that reaches the executor after a step it stopped failed with
    its `cancelled:` line (defs/talent_import/assets.py) ends the plan here: Dagster then ends the
    run CANCELED with "Run was canceled. Failed steps: [...]", not with the interrupt's stack
    trace. Any other interrupt goes on as Dagster's."""
    stopped = False
    try:
        for event in events:
            stopped = stopped or event.is_step_failure
            yield event
    except INTERRUPTS:
        run = plan_context.instance.get_run_by_id(plan_context.run_id)
        if not (stopped and run is not None and run.status == dg.DagsterRunStatus.CANCELING):
            raise


def with_run_worker_heartbeat(
    executor: dg.ExecutorDefinition, applies: Callable[[dg.DagsterRun], bool] = is_import_run
) -> dg.ExecutorDefinition:
    """`executor` (same name, config schema and requirements) whose run worker beats for the import
    run of its Dagster run (talent_import/run_worker.py)."""
    create = executor.executor_creation_fn
    assert create is not None

    def creation_fn(init_context: dg.InitExecutorContext) -> dg.Executor:
        return RunWorkerExecutor(create(init_context), applies)

    return dg.ExecutorDefinition(
        name=executor.name,
        config_schema=executor.config_schema,  # type: ignore[arg-type]  # its schema as is (a configured one too)
        requirements=executor.get_requirements,
        executor_creation_fn=creation_fn,
        description=executor.description,
    )

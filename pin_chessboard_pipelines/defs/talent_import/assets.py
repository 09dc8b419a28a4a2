"""The six stage assets of the talent initial import (docs/talent-initial-import.md#stages-and-barriers).

developers -> projects -> buildings -> layout_groups -> layouts -> property_objects share one
DynamicPartitionsDefinition keyed by Talent developer id; the dependency edges are the stage
barriers. Materializing one partition re-syncs one developer (DeveloperIdFilter); a run over all
partitions (single-run backfill) lists the source without a developer filter.

Each stage is a graph of steps: `<stage>_plan` -> `<stage>_pages[0]` .. `<stage>_pages[P-1]` ->
`<stage>_barrier`: the plan starts one page step per process the run asks for (`processes`, a
dynamic output each, defs/fan_out.py), in OS processes or pods with the multiprocess or k8s
executor; a run holds no other. Every step rebuilds its session from the database.
"""

import inspect
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg

from pin_chessboard_pipelines.defs.fan_out import start_workers, worker_index, worker_out
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import graceful_interrupts
from pin_chessboard_pipelines.defs.talent_import.checks import quarantine_check
from pin_chessboard_pipelines.defs.talent_import.config import (
    ASSET_KEYS,
    GROUP,
    IMPORT_JOB,
    IMPORT_TAG,
    IMPORT_TAGS,
    OWNERS,
    POOL,
    QUARANTINE_CHECK,
    TALENT_DEVELOPERS,
    TALENT_GROUP,
    TALENT_KEYS,
    TalentImportConfig,
    asset_name,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import developer_id_of
from pin_chessboard_pipelines.defs.talent_import.session import step_session
from pin_chessboard_pipelines.defs.talent_import.stage_metadata import partition_metadata, run_metadata
from pin_chessboard_pipelines.entities import ENTITIES, Entity
from pin_chessboard_pipelines.errors import RunEnded, StageFailed, error_line
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.page_worker import process_name
from pin_chessboard_pipelines.talent_import.progress import StageProgress
from pin_chessboard_pipelines.talent_import.request import PROCESSES_MAX, RunStatus
from pin_chessboard_pipelines.talent_import.runner import ImportSession
from pin_chessboard_pipelines.talent_import.stage_runner import stage_report, stage_walked

# A page step whose process died is started again this many times (it rejoins the stage; the dead
# process's page is claimed again once its heartbeat is 45 s old).
WORKER_RETRIES = 3


def _stages_in_run(context: dg.AssetExecutionContext) -> list[str]:
    """The stage assets this Dagster run executes, in stage order (the last one finishes the import)."""
    selected = context.job_def.asset_layer.selected_asset_keys
    steps = context.run.step_keys_to_execute
    return [
        stage.stage
        for stage in ENTITIES
        if ASSET_KEYS[stage.stage] in selected and (steps is None or _barrier_step(stage) in steps)
    ]


def _barrier_step(stage: Entity) -> str:
    name = asset_name(stage)
    return f"{name}.{name}_barrier"


def _failure(session: ImportSession, error: BaseException, stage: Entity) -> dg.Failure:
    """A stage's failure ends the import run Failed (resumable), first process to see it."""
    line = str(error) if isinstance(error, (StageFailed, RunEnded)) else error_line(error)
    if not isinstance(error, RunEnded):
        session.end(RunStatus.FAILED, line)
    cause = (
        line if isinstance(error, StageFailed) else f"stage {stage.name} failed: {line}"
    )  # names its stage
    return dg.Failure(
        description=f"{cause} (resumable: re-execute from failure)",
        metadata={"import_run_id": str(session.run_id)},
    )


def _cancelled(what: str) -> dg.Failure:
    """The end of a step a terminate stopped: not a success (Dagster has no cancelled step), one
    line, no retry of it (docs/talent-initial-import.md#terminate)."""
    return dg.Failure(description=f"cancelled: the run was stopped; {what}", allow_retries=False)


NOT_STARTED = "this step started after it and did nothing"


@contextmanager
def _cancelled_when_interrupted(session: ImportSession, stage: Entity) -> Iterator[None]:
    """A terminate (or Ctrl-C) inside this step ends the import run Cancelled, first process to see
    it, and the step with its one line."""
    try:
        yield
    except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt):
        session.end(RunStatus.CANCELLED, "cancelled")
        raise _cancelled(f"{stage.name}: the barrier stopped before its pages were Done") from None


INTERRUPTS = (dg.DagsterExecutionInterruptedError, KeyboardInterrupt)
TERMINATED = (dg.DagsterRunStatus.CANCELING, dg.DagsterRunStatus.CANCELED)


def _terminated(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id)
    return run is not None and run.status in TERMINATED


def _plan(
    stage: Entity,
    context: dg.AssetExecutionContext,
    chessboard: ChessboardResource,
    config: TalentImportConfig,
):
    """The stage's first step: the import run joined (started or resumed by the run's first step),
    then one dynamic output per process that works on the stage, each starting a page step. On a
    terminate it fails with its one `cancelled:` line and starts none: nothing downstream starts,
    and "Re-execute from failure" runs it again (it joins the resumed import run)."""
    if _terminated(context.instance, context.run.run_id):
        raise _cancelled(f"{stage.name}: {NOT_STARTED}")
    _join_plan(context, chessboard, config)
    if _terminated(context.instance, context.run.run_id):
        raise _cancelled(f"{stage.name}: the stage's page steps did not start")
    yield from start_workers(config.processes, PROCESSES_MAX)


def _join_plan(
    context: dg.AssetExecutionContext, chessboard: ChessboardResource, config: TalentImportConfig
) -> None:
    try:
        session = step_session(context, chessboard, config)
    except INTERRUPTS:
        return  # no run row was joined here: the run status sensor ends it
    try:
        try:
            if session.opened_here:
                context.log.info(
                    f"import run {session.run_id} {'resumed' if session.resumed else 'started'} "
                    f"(correlation id {session.correlation_id}, scopes {session.scope_keys}, "
                    f"{config.processes} process(es) x {config.workers} worker(s))"
                )
            if context.run.tags.get(IMPORT_TAG) != IMPORT_JOB:
                context.instance.add_run_tags(
                    context.run.run_id, IMPORT_TAGS
                )  # Runs filtered by it: every import
        except INTERRUPTS:
            session.end(RunStatus.CANCELLED, "cancelled")
    finally:
        session.close()


def _work(
    stage: Entity,
    index: int,
    context: dg.AssetExecutionContext,
    chessboard: ChessboardResource,
    config: TalentImportConfig,
) -> None:
    """One process's page workers of the stage, until its barrier (docs/talent-initial-import.md#processes).

    When the Dagster run is terminated the import run ends Cancelled (first process to see it) and
    the step fails with one `cancelled:` line, not a retry: an interrupt must not reach the step's
    retry policy, which would start the step again as attempts 2-4 of a failure
    (docs/talent-initial-import.md#terminate). The run that resumes the import runs the same page step again."""
    if _terminated(context.instance, context.run.run_id):
        # a step started after the terminate, or a retry of one it interrupted
        raise _cancelled(f"{stage.name}: {NOT_STARTED}")
    try:
        session = step_session(context, chessboard, config)
    except INTERRUPTS:
        # no run row was joined here: the run status sensor ends it
        raise _cancelled(f"{stage.name}: this process ({process_name()}) joined no import run") from None
    try:
        progress = StageProgress(session.engine, session.run_id, stage.stage, session.log_fields(stage.stage))
        try:
            with progress if index == 0 else nullcontext():  # one stage-progress line per stage
                report = session.work_stage(stage)
        except INTERRUPTS:
            report = None
        except Exception as error:  # noqa: BLE001 - any failure ends the import run Failed, resumable
            raise _failure(session, error, stage) from None
        if report is None or (report.cancelled and session.should_stop()):
            session.end(RunStatus.CANCELLED, "cancelled")
            context.log.info(f"{stage.name}: this process ({process_name()}) stopped: the run was terminated")
            raise _cancelled(f"{stage.name}: this process ({process_name()}) stopped its page workers")
        context.log.info(
            f"{stage.name}: this process ({process_name()}) applied {report.pages_processed} page(s)"
        )
    finally:
        session.close()


def _barrier(
    stage: Entity,
    context: dg.AssetExecutionContext,
    chessboard: ChessboardResource,
    config: TalentImportConfig,
):
    """The stage barrier: every walk ended and every page Done, whoever did them; the stage's
    materialization (per developer partition) and its check; the import run completed after the
    last stage of the run. Pages its page steps left it works itself first. A terminate before it
    starts fails it with its `cancelled:` line; one while it reports lets it end whole (moments),
    and the next step of the run fails so (the in-process executor would start it)."""
    if _terminated(context.instance, context.run.run_id):
        raise _cancelled(f"{stage.name}: {NOT_STARTED}")
    session = step_session(context, chessboard, config)
    try:
        try:
            with _cancelled_when_interrupted(session, stage):
                if not session.stage_complete(stage):
                    session.work_stage(stage)
        except dg.Failure:
            raise
        except Exception as error:  # noqa: BLE001 - any failure ends the import run Failed, resumable
            raise _failure(session, error, stage) from None
        with graceful_interrupts():
            yield from _report_stage(stage, context, chessboard, session)
    finally:
        session.close()


def _report_stage(
    stage: Entity,
    context: dg.AssetExecutionContext,
    chessboard: ChessboardResource,
    session: ImportSession,
):
    try:
        report = stage_report(session, stage)
        if report.cancelled:
            raise StageFailed(
                f"stage {stage.stage}: the barrier is not reached: {report.pages} page(s), "
                f"{report.failed_pages} Failed, the walk "
                f"{'ended' if stage_walked(session, stage) else 'did not end'}"
            )
        if stage.stage == _stages_in_run(context)[-1]:
            session.finish(RunStatus.COMPLETED)
    except Exception as error:  # noqa: BLE001 - any failure ends the import run Failed, resumable
        raise _failure(session, error, stage) from None
    if report.counters.applied and not session.request.dry_run:
        chessboard.relay_outbox(context)
    since = _run_started(context)
    with session.engine.connect() as conn:
        figures = runs.stage_figures(conn, session.run_id, stage.stage, since)
        by_tenant = runs.stage_tenant_counters(conn, session.run_id, stage.stage)
        keys = list(context.partition_keys)
        names = runs.developer_names(conn, [developer_id_of(key) for key in keys])
    run_wide = run_metadata(session, report, figures)
    # all of it per partition, none on the output: Dagster lists output metadata first
    for key, metadata in partition_metadata(keys, by_tenant, run_wide, names).items():
        context.add_asset_metadata(metadata, partition_key=key)
    yield dg.Output(None, "result")
    yield quarantine_check(session, stage, report)


def _run_started(context: dg.AssetExecutionContext) -> datetime:
    record = context.instance.get_run_record_by_id(context.run.run_id)
    started = record.start_time if record is not None and record.start_time else None
    return datetime.fromtimestamp(started, UTC) if started else datetime.now(UTC) - timedelta(days=1)


def _talent_source(stage: Entity) -> dg.AssetSpec:
    return dg.AssetSpec(
        TALENT_KEYS[stage.stage],
        group_name=TALENT_GROUP,
        kinds={"kafka"},
        owners=OWNERS,
        description=f"Talent Chessboard's {stage.name} snapshots: the HTTP collection "
        f"`/api/v1/{stage.collection}` (ApiPull) and the compacted topic `{stage.topic}` "
        "(TopicReplay, talent-sync). External: Talent owns it.",
    )


TALENT_SOURCES = [_talent_source(stage) for stage in ENTITIES]


def _stage_ops(
    stage: Entity, upstream: dict[str, dg.In]
) -> tuple[dg.OpDefinition, dg.OpDefinition, dg.OpDefinition]:
    """The stage's three ops: its plan, its page-worker op (mapped: one step per process) and its
    barrier."""
    key = ASSET_KEYS[stage.stage]
    name = asset_name(stage)
    op_tags = {"pin/stage": stage.stage}

    def yielding_op(step: str, events: Callable[..., Iterator[Any]], **op: Any) -> dg.OpDefinition:
        """The stage's op `<name>_<step>` whose events are `events(stage, …)`'s."""

        def compute(
            context: dg.AssetExecutionContext,
            chessboard: ChessboardResource,
            talent_import: TalentImportConfig,
        ):
            yield from events(stage, context, chessboard, talent_import)

        return dg.op(name=f"{name}_{step}", pool=POOL, tags=op_tags, **op)(compute)

    plan = yielding_op(
        "plan",
        _plan,
        ins=upstream,
        out=worker_out(f"One per process of stage {stage.stage}: starts its page step"),
        description=f"Joins (or starts/resumes) the import run; starts a page step per process of stage {stage.stage}",
    )

    @dg.op(
        name=f"{name}_pages",
        ins={"go": dg.In(dg.Nothing)},
        out=dg.Out(dg.Nothing),
        pool=POOL,
        tags=op_tags,
        # a worker whose process died (SIGKILL, an evicted pod) starts again and rejoins the stage
        retry_policy=dg.RetryPolicy(max_retries=WORKER_RETRIES, delay=1),
        description=f"Page workers of stage {stage.stage}, one process (the step key's [index]): "
        "claim, read, apply",
    )
    def pages(
        context: dg.AssetExecutionContext,
        chessboard: ChessboardResource,
        talent_import: TalentImportConfig,
    ) -> None:
        _work(stage, worker_index(context), context, chessboard, talent_import)

    barrier = yielding_op(
        "barrier",
        _barrier,
        ins={"pages": dg.In(dg.Nothing)},
        out={"result": dg.Out(dg.Nothing), _check_output(key): dg.Out(dg.Nothing, is_required=False)},
        description=f"Stage {stage.stage}'s barrier: every page Done; the materialization and its check",
    )
    return plan, pages, barrier


def _stage_asset(stage: Entity, parent: Entity | None) -> dg.AssetsDefinition:
    """A graph-backed asset: plan -> the page-worker op mapped over the plan's dynamic output (one
    step per process of the run) -> barrier, collecting them, with Nothing edges only (no value
    crosses an IO manager). The executor runs the page steps in one process (in_process), in OS
    processes (multiprocess) or in pods (k8s)."""
    key = ASSET_KEYS[stage.stage]
    name = asset_name(stage)
    upstream = {"talent": dg.In(dg.Nothing), **({"parent": dg.In(dg.Nothing)} if parent else {})}
    plan, pages, barrier = _stage_ops(stage, upstream)

    def compose(**upstream_assets):
        started = plan(**upstream_assets)
        done = started.map(lambda go: pages(go))
        ended = barrier(done.collect())
        return {"result": ended.result, _check_output(key): getattr(ended, _check_output(key))}

    # the graph's inputs as keyword parameters, in the order of `upstream` (Dagster reads them from
    # the signature; two plain functions gave an input order that changed with the hash seed, and
    # with it the job's snapshot id between processes)
    compose.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in upstream]
    )
    compose.__name__ = name
    return dg.graph_asset(
        key=key,
        group_name=GROUP,
        partitions_def=TALENT_DEVELOPERS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        ins={
            "talent": dg.AssetIn(TALENT_KEYS[stage.stage], dagster_type=dg.Nothing),
            **({"parent": dg.AssetIn(ASSET_KEYS[parent.stage], dagster_type=dg.Nothing)} if parent else {}),
        },
        kinds={"postgres"},
        owners=OWNERS,
        description=f"Talent {stage.name} replicas in `chessboard.{stage.table}`, stage {stage.stage} "
        "of the talent initial import (docs/talent-initial-import.md). One partition per Talent "
        "developer; materializing every partition in one run is the full bootstrap (listed without a "
        "developer filter); launchpad config: `resources.talent_import.config` (`processes`: how many "
        "processes work on each stage). Each partition's materialization lists that developer's own "
        "figures first, the import run's after (`metadata_keys` says what each key means).",
        check_specs=[
            dg.AssetCheckSpec(
                QUARANTINE_CHECK, asset=key, description="no item of this stage was quarantined"
            )
        ],
    )(compose)


def _check_output(key: dg.AssetKey) -> str:
    """The graph output of the stage's quarantine check (graph_asset names it so)."""
    return f"{key.to_python_identifier()}_{QUARANTINE_CHECK}"


with warnings.catch_warnings():
    # single-run backfills: one import run over all partitions (docs/talent-initial-import.md#filters)
    warnings.simplefilter("ignore", dg.BetaWarning)
    STAGE_ASSETS = [
        _stage_asset(stage, parent) for parent, stage in zip((None, *ENTITIES[:-1]), ENTITIES, strict=True)
    ]

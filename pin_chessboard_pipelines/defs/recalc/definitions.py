"""project-aggregates-recalc in Dagster (docs/project-aggregates-recalc.md): the drain job, its 5 s sensor, and the checks
that make drift and poison rows visible on the `chessboard_aggregates` asset.

Thin shells over recalc/: the loop is `recalc.drain.drain`, the audit `recalc.audit.audit`.
"""

import json
import time

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.dagster_private import DagsterExecutionInterruptedError
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import (
    SINGLETON_TAG,
    graceful_interrupts,
    singleton_run_request,
    skip_while_active,
)
from pin_chessboard_pipelines.errors import RECALC_POISON
from pin_chessboard_pipelines.observability import metrics
from pin_chessboard_pipelines.recalc.audit import audit
from pin_chessboard_pipelines.recalc.drain import REPUBLISHED, DrainResult, drain
from pin_chessboard_pipelines.recalc.queue import due_summary, poison_rows

JOB_NAME = "project_aggregates_recalc"
OP_NAME = "drain_recalc_queue"
SENSOR_NAME = "project_aggregates_recalc_sensor"
AUDIT_JOB_NAME = "chessboard_aggregates_audit"
SINGLETON_VALUE = "recalc-drain"
TICK_SECONDS = (
    5  # worker tick, also Dagster's minimum sensor interval (docs/project-aggregates-recalc.md#drain)
)
DEFAULT_TIME_BUDGET_SECONDS = 25.0  # a tick takes < 30 s (docs/project-aggregates-recalc.md#drain)

AGGREGATES = dg.AssetSpec(
    "chessboard_aggregates",
    description=(
        "Denormalized aggregates of projects, buildings, layouts and layout groups in the chessboard "
        "store, kept by the project-aggregates-recalc drain (docs/project-aggregates-recalc.md)."
    ),
    group_name="recalc",
    kinds={"postgres"},
)
AUDIT_CHECK = "aggregates_match_formulas"
POISON_CHECK = "no_poison_recalc_rows"


class RecalcDrainConfig(dg.Config):
    time_budget_seconds: float = Field(
        default=DEFAULT_TIME_BUDGET_SECONDS,
        description="Stop taking new projects after this many seconds; the rest waits for the next run.",
    )
    until_empty: bool = Field(default=False, description="No time budget: drain until no due row is left.")


def _metadata(result: DrainResult) -> dict[str, dg.MetadataValue]:
    summary = result.summary()
    return {
        "projects_recalculated": dg.MetadataValue.int(result.recalculated),
        "projects_failed": dg.MetadataValue.int(result.failed),
        "projects_skipped_archived": dg.MetadataValue.int(result.skipped_archived),
        "projects_poisoned": dg.MetadataValue.int(len(result.poisoned)),
        "coalesced_events": dg.MetadataValue.int(result.coalesced_events),
        **{
            f"republished_{entity}": dg.MetadataValue.int(result.republished.get(entity, 0))
            for entity in REPUBLISHED
        },
        "buildings_changed": dg.MetadataValue.int(result.buildings_changed),
        "batches": dg.MetadataValue.int(result.batches),
        "duration_seconds": dg.MetadataValue.float(round(result.duration_seconds, 3)),
        "projects_per_second": dg.MetadataValue.float(round(result.projects_per_second, 1)),
        "stopped": dg.MetadataValue.text(result.stopped),
        "summary": dg.MetadataValue.json(summary),
    }


def _poison_evaluation(rows: list[dict]) -> dg.AssetCheckEvaluation:
    return dg.AssetCheckEvaluation(
        asset_key=AGGREGATES.key,
        check_name=POISON_CHECK,
        passed=not rows,
        severity=dg.AssetCheckSeverity.ERROR,
        description=None if not rows else f"{RECALC_POISON}: {len(rows)} recalc row(s) kept for the runbook",
        metadata=_poison_metadata(rows),
    )


def _poison_metadata(rows: list[dict]) -> dict[str, dg.MetadataValue]:
    return {
        "poison_rows": dg.MetadataValue.int(len(rows)),
        "rows": dg.MetadataValue.json(
            [
                {
                    "projectId": str(row["project_id"]),
                    "attemptCount": row["attempt_count"],
                    "lastError": row["last_error"],
                }
                for row in rows[:50]
            ]
        ),
    }


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def drain_recalc_queue(
    context: dg.OpExecutionContext, config: RecalcDrainConfig, chessboard: ChessboardResource
) -> dg.Output:
    """Drains due recalc rows, batch after batch, each project in its own transaction."""
    settings = chessboard.settings
    budget = None if config.until_empty else config.time_budget_seconds
    with graceful_interrupts() as interrupted:
        result = drain(
            chessboard.engine,
            batch_size=settings.recalc_batch_size,
            poison_attempts=settings.recalc_poison_attempts,
            time_budget_seconds=budget,
            should_stop=interrupted,
            correlation_id=context.run_id,
            run_log=context.log,  # batches, failures, poison; per-project lines stay in the Python log
        )
    context.log.info(f"recalc drain: {json.dumps(result.summary())}")
    if sum(result.republished.values()):
        chessboard.relay_outbox(context.log)
    with chessboard.engine.connect() as conn:
        poison = poison_rows(conn, settings.recalc_poison_attempts)
    # log_event accepts check evaluations at run time; its annotation lags behind
    context.log_event(_poison_evaluation(poison))  # type: ignore[arg-type]
    if result.processed or result.failed:
        context.log_event(dg.AssetObservation(asset_key=AGGREGATES.key, metadata=_metadata(result)))
    if result.stopped == "cancelled":
        raise DagsterExecutionInterruptedError()
    return dg.Output(None, metadata=_metadata(result))


@dg.job(
    name=JOB_NAME,
    description="project-aggregates-recalc: drains due rows of project_recalc_requests.",
    executor_def=dg.in_process_executor,
    tags={SINGLETON_TAG: SINGLETON_VALUE},
)
def project_aggregates_recalc() -> None:
    drain_recalc_queue()


@dg.sensor(
    name=SENSOR_NAME,
    job_name=JOB_NAME,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every 5 s: requests a drain run when due recalc rows exist and no drain is queued or running.",
)
def project_aggregates_recalc_sensor(
    context: dg.SensorEvaluationContext, chessboard: ChessboardResource
) -> dg.SensorResult | dg.SkipReason:
    now = time.time()
    metrics.RECALC_TICKS.inc()
    metrics.RECALC_LAST_TICK.set(now)
    settings = chessboard.settings
    with chessboard.engine.connect() as conn:
        summary = due_summary(conn, settings.recalc_poison_attempts)
    if summary.poison:
        context.log.warning(f"{RECALC_POISON}: {summary.poison} due row(s) are poison and skipped")
    if summary.due == 0:
        return dg.SkipReason("no due recalc rows")
    busy = skip_while_active(context, JOB_NAME, f"{summary.due} due row(s); drain run")
    if busy:
        return busy
    oldest = None if summary.oldest_due_at is None else summary.oldest_due_at.isoformat()
    return singleton_run_request(
        "recalc-drain", SINGLETON_VALUE, now, {"due": summary.due, "oldestDueAt": oldest}
    )


@dg.asset_check(
    asset=AGGREGATES.key,
    name=AUDIT_CHECK,
    description="Stored aggregates equal count/min/max over property objects and layouts (0 divergences).",
)
def aggregates_audit_check(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    with chessboard.engine.connect() as conn:
        divergences = audit(conn)
    by_entity: dict[str, int] = {}
    for d in divergences:
        by_entity[d.entity] = by_entity.get(d.entity, 0) + 1
    return dg.AssetCheckResult(
        passed=not divergences,
        severity=dg.AssetCheckSeverity.ERROR,
        description=None if not divergences else f"{len(divergences)} divergence(s)",
        metadata={
            "divergences": dg.MetadataValue.int(len(divergences)),
            "projects_with_divergences": dg.MetadataValue.int(len({d.project_id for d in divergences})),
            "by_entity": dg.MetadataValue.json(by_entity),
            "sample": dg.MetadataValue.json([d.as_dict() for d in divergences[:50]]),
        },
    )


@dg.asset_check(
    asset=AGGREGATES.key,
    name=POISON_CHECK,
    description=f"{RECALC_POISON}: no recalc row has reached the poison AttemptCount.",
)
def poison_rows_check(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    with chessboard.engine.connect() as conn:
        rows = poison_rows(conn, chessboard.settings.recalc_poison_attempts)
    evaluation = _poison_evaluation(rows)
    return dg.AssetCheckResult(
        passed=evaluation.passed,
        severity=evaluation.severity,
        description=evaluation.description,
        metadata=evaluation.metadata,
    )


chessboard_aggregates_audit = dg.define_asset_job(
    AUDIT_JOB_NAME,
    selection=dg.AssetSelection.checks_for_assets(AGGREGATES.key),
    description="Runs the audit and poison checks of the recalc aggregates.",
)

chessboard_aggregates_audit_schedule = dg.ScheduleDefinition(
    name="chessboard_aggregates_audit_hourly",
    job=chessboard_aggregates_audit,
    cron_schedule="17 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[AGGREGATES],
        asset_checks=[aggregates_audit_check, poison_rows_check],
        jobs=[project_aggregates_recalc, chessboard_aggregates_audit],
        sensors=[project_aggregates_recalc_sensor],
        schedules=[chessboard_aggregates_audit_schedule],
    )

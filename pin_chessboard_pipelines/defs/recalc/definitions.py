"""project-aggregates-recalc in Dagster (docs/project-aggregates-recalc.md): the drain job, its 5 s sensor, and the checks
that make drift and poison rows visible on the `chessboard_aggregates` asset.

Thin shells over recalc/: the loop is `recalc.drain_slot.drain_until` (a run polls the queue for one time
slot, `recalc.drain_timing`), the audit `recalc.audit.audit`. A run's first drain step, `drain_0`,
starts with the run; beside it `start_drains` starts the others when the run asks for more than one
(CHESSBOARD_RECALC_DRAINS): `drain[1]` .. (a dynamic output each, defs/fan_out.py). Each claims its
own rows.
"""

import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.declare import SensorTick, running_sensor
from pin_chessboard_pipelines.defs.fan_out import (
    concurrent_steps_config,
    start_workers,
    worker_out,
    worker_step_key,
)
from pin_chessboard_pipelines.defs.recalc.checks import (
    AGGREGATES,
    aggregates_audit_check,
    audit_evaluation,
    chessboard_aggregates_audit,
    chessboard_aggregates_audit_schedule,
    poison_evaluation,
    poison_rows_check,
)
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import IN_PROGRESS, NO_RUN_RETRIES, graceful_interrupts
from pin_chessboard_pipelines.errors import RECALC_POISON
from pin_chessboard_pipelines.observability import metrics
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.recalc.drain import REPUBLISHED, DrainResult, drain, store_policy
from pin_chessboard_pipelines.recalc.drain_slot import drain_until
from pin_chessboard_pipelines.recalc.drain_timing import (
    drain_run_key,
    needs_drain_run,
    next_attempt,
    slot_for,
)
from pin_chessboard_pipelines.recalc.queue import due_summary, next_due_in, poison_rows
from pin_chessboard_pipelines.settings import load_settings
from pin_chessboard_pipelines.stopper import StopReason

JOB_NAME = "project_aggregates_recalc"
FIRST_DRAIN = "drain_0"  # the run's first drain step, started with the run
MORE_DRAINS = "drain"  # the op of the other drain steps: drain[1] .. drain[N-1]
START_OP = "start_drains"  # beside drain_0: starts drain[1] .. drain[N-1]
DRAINS_MAX = 16  # CHESSBOARD_RECALC_DRAINS' upper bound (settings.py)
SENSOR_NAME = "project_aggregates_recalc_sensor"
SINGLETON_VALUE = "recalc-drain"
# dagster.yaml lets two runs with this tag run at once: the live drain and its successor.
DRAIN_TAG = "pin/recalc-drain"
UNTIL_TAG = "pin/recalc-drain-until"  # when the run ends (the end of its slot), ISO-8601 UTC
SLOT_TAG = "pin/recalc-drain-slot"
TICK_SECONDS = (
    5  # worker tick, also Dagster's minimum sensor interval (docs/project-aggregates-recalc.md#drain)
)
DEFAULT_TIME_BUDGET_SECONDS = 25.0  # a tick takes < 30 s (docs/project-aggregates-recalc.md#drain)
# run monitoring fails a drain run that outlives its slot by this much (its worker is gone)
MAX_RUNTIME_GRACE_SECONDS = 300


class RecalcDrainConfig(dg.Config):
    poll_until: float | None = Field(
        default=None,
        description=(
            "Unix time: keep draining, sleeping until the next DueAt in between, until then (the sensor "
            "sets the end of the run's time slot). Null: one pass over the due rows."
        ),
    )
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
        "stopped": dg.MetadataValue.text(result.stopped.value),
        "summary": dg.MetadataValue.json(summary),
    }


def drain_op_names(drains: int) -> list[str]:
    """The ops whose steps drain in a run of `drains` drains: drain_0, and the op mapped for the
    others when there are (CHESSBOARD_RECALC_DRAINS)."""
    return [FIRST_DRAIN, *([MORE_DRAINS] if drains > 1 else [])]


def drain_step_keys(drains: int) -> list[str]:
    """The drain steps of a run of `drains` drains: drain_0, drain[1] .. drain[drains-1]."""
    return [FIRST_DRAIN, *(worker_step_key(MORE_DRAINS, index) for index in range(1, drains))]


def drain_run_config(drains: int, config: dict[str, Any]) -> dict[str, Any]:
    """Run config starting `drains` drain steps, each with the same config, all of them at once."""
    return {
        "ops": {
            START_OP: {"config": {"drains": drains}},
            FIRST_DRAIN: {"config": config},
            MORE_DRAINS: {"config": config},
        },
        **concurrent_steps_config(drains),
    }


class DrainStartConfig(dg.Config):
    drains: int | None = Field(
        default=None,
        ge=1,
        le=DRAINS_MAX,
        description="How many drain steps this run has, drain_0 among them; null: "
        "CHESSBOARD_RECALC_DRAINS when the run starts.",
    )


@dg.op(
    name=START_OP,
    out=worker_out("One per drain step after drain_0", may_start_none=True),
    description="Starts the run's drain steps after drain_0 (which starts with the run): as many "
    "as its config or CHESSBOARD_RECALC_DRAINS says, less one; none for one drain.",
)
def start_drains(config: DrainStartConfig):
    yield from start_workers(config.drains or load_settings().recalc_drains, DRAINS_MAX, first=1)


def _drain_step(name: str, *, reports_poison: bool) -> dg.OpDefinition:
    ins = {} if reports_poison else {"go": dg.In(dg.Nothing)}

    @dg.op(name=name, ins=ins, out=dg.Out(dg.Nothing))
    def drain_step(
        context: dg.OpExecutionContext, config: RecalcDrainConfig, chessboard: ChessboardResource
    ) -> dg.Output:
        """One drain worker of the run: drains due recalc rows, each project in its own transaction;
        the run's other drain steps take other rows (FOR UPDATE SKIP LOCKED)."""
        return _drain(context, config, chessboard, reports_poison=reports_poison)

    return drain_step


def _drain(
    context: dg.OpExecutionContext,
    config: RecalcDrainConfig,
    chessboard: ChessboardResource,
    *,
    reports_poison: bool,
) -> dg.Output:
    settings = chessboard.settings
    common: dict[str, Any] = dict(
        batch_size=settings.recalc_batch_size,
        poison_attempts=settings.recalc_poison_attempts,
        correlation_id=context.run_id,
        run_log=context.log,  # batches, failures, poison; per-project lines stay in the Python log
        # a store that restarts is waited for (the page-retry budget), not reported as empty
        policy=store_policy(settings.import_page_retry_seconds),
    )

    def relay_events(result: DrainResult) -> None:
        if sum(result.republished.values()):
            chessboard.relay_outbox(context)

    with graceful_interrupts() as interrupted:
        if config.poll_until is not None:
            log_event(context.log, logging.INFO, "recalc_drain_polling", Until=_iso(config.poll_until))
            result = drain_until(
                chessboard.engine,
                ends_at=config.poll_until,
                poll_seconds=settings.recalc_drain_poll_seconds,
                should_stop=interrupted,
                after_pass=relay_events,
                **common,
            )
        else:
            budget = None if config.until_empty else config.time_budget_seconds
            result = drain(chessboard.engine, time_budget_seconds=budget, should_stop=interrupted, **common)
            relay_events(result)
    log_event(context.log, logging.INFO, "recalc_drain_finished", Summary=json.dumps(result.summary()))
    _report(context, chessboard, result, reports_poison=reports_poison)
    if result.stopped is StopReason.CANCELLED:
        raise dg.DagsterExecutionInterruptedError()
    if config.until_empty and result.stopped is StopReason.FAILED:
        # --until-empty is honest: due rows are left, so the run did not do what it was asked
        raise dg.Failure(
            description=f"{len(set(result.failed_ids))} due recalc row(s) left after failures "
            f"(AttemptCount and LastError on each row)",
            metadata={"summary": dg.MetadataValue.json(result.summary())},
        )
    return dg.Output(None, metadata=_metadata(result))


def _report(
    context: dg.OpExecutionContext,
    chessboard: ChessboardResource,
    result: DrainResult,
    *,
    reports_poison: bool,
) -> None:
    """The poison check's evaluation (once per run), the aggregates' materialization and, with it,
    the audit check's evaluation."""
    if reports_poison:
        with chessboard.engine.connect() as conn:
            poison = poison_rows(conn, chessboard.settings.recalc_poison_attempts)
        # log_event accepts check evaluations at run time; its annotation lags behind
        context.log_event(poison_evaluation(poison))  # type: ignore[arg-type]
    if result.processed or result.failed:
        context.log_event(dg.AssetMaterialization(asset_key=AGGREGATES.key, metadata=_metadata(result)))
        # the audit check is evaluated with each materialization (same run: the UI shows it on it)
        with chessboard.engine.connect() as conn:
            context.log_event(audit_evaluation(conn))  # type: ignore[arg-type]


def recalc_job(resource_defs: dict[str, Any] | None = None) -> dg.JobDefinition:
    """The drain job: `drain_0`, started with the run (it reports the poison check), and the drain
    steps `start_drains` starts beside it when the run asks for more than one (CHESSBOARD_RECALC_DRAINS
    or its config's `drains`), the fan-out of defs/fan_out.py. Steps of one run, so the run count per
    hour stays the slot's (docs/project-aggregates-recalc.md#drain); the executor (the definitions'
    own) decides whether they run one after another in one process or in OS processes at once."""
    first = _drain_step(FIRST_DRAIN, reports_poison=True)
    more = _drain_step(MORE_DRAINS, reports_poison=False)

    @dg.job(
        name=JOB_NAME,
        description="project-aggregates-recalc: drains of project_recalc_requests' due rows "
        "(CHESSBOARD_RECALC_DRAINS of them, or the run config's `drains`).",
        tags={DRAIN_TAG: SINGLETON_VALUE, **NO_RUN_RETRIES},
        resource_defs=resource_defs,
    )
    def project_aggregates_recalc() -> None:
        first()
        start_drains().map(more)

    return project_aggregates_recalc


@running_sensor(SENSOR_NAME, TICK_SECONDS, job_name=JOB_NAME)
def project_aggregates_recalc_sensor(
    context: dg.SensorEvaluationContext, chessboard: ChessboardResource
) -> SensorTick:
    """Every 5 s: keeps one long-lived drain run alive while recalc rows are queued, starting the next
    time slot's run ahead of the current one's end (CHESSBOARD_RECALC_DRAIN_*)."""
    now = time.time()
    metrics.RECALC_TICKS.inc()
    metrics.RECALC_LAST_TICK.set(now)
    settings = chessboard.settings
    live = _live_drains(context.instance)
    covered_until = max((until for _, until in live), default=0.0)
    with chessboard.engine.connect() as conn:
        summary = due_summary(conn, settings.recalc_poison_attempts)
        due_in = next_due_in(conn, settings.recalc_poison_attempts, after=covered_until)
    if summary.poison:
        context.log.warning(f"{RECALC_POISON}: {summary.poison} due row(s) are poison and skipped")
    lead = settings.recalc_drain_lead_seconds
    if not needs_drain_run(due_in, lead):
        covered = f"drain run {live[0][0]} polls the queue until {_iso(covered_until)}; " if live else ""
        if due_in is None:
            return dg.SkipReason(covered + ("no row due after that" if live else "no recalc row queued"))
        return dg.SkipReason(
            f"{covered}the next recalc row is due in {due_in:.0f}s; a drain run starts {lead:.0f}s ahead"
        )
    slot = slot_for(now, settings.recalc_drain_lifetime_seconds, lead)
    last_slot, last_attempt = _cursor(context.cursor)
    attempt = next_attempt(last_slot, last_attempt, slot.index)
    run_key = drain_run_key(slot.index, attempt)
    max_runtime = int(slot.ends_at - now) + MAX_RUNTIME_GRACE_SECONDS
    return dg.SensorResult(
        run_requests=[
            dg.RunRequest(
                run_key=run_key,
                run_config=drain_run_config(settings.recalc_drains, {"poll_until": slot.ends_at}),
                tags={
                    DRAIN_TAG: SINGLETON_VALUE,
                    SLOT_TAG: str(slot.index),
                    UNTIL_TAG: _iso(slot.ends_at),
                    "dagster/max_runtime": str(max_runtime),
                },
            )
        ],
        # the slot whose run was requested last and how many times: a run that ended early is replaced
        cursor=json.dumps({"slot": slot.index, "attempt": attempt}),
    )


def _live_drains(instance: dg.DagsterInstance) -> list[tuple[str, float]]:
    """(run id, end of its slot) of the drain runs queued or in flight, latest end first."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(job_name=JOB_NAME, statuses=IN_PROGRESS, tags={DRAIN_TAG: SINGLETON_VALUE}),
        limit=10,
    )
    live = [(run.run_id, until_of(run.tags[UNTIL_TAG])) for run in runs if UNTIL_TAG in run.tags]
    return sorted(live, key=lambda item: -item[1])


def _cursor(cursor: str | None) -> tuple[int | None, int]:
    try:
        data = json.loads(cursor) if cursor else {}
        return int(data["slot"]), int(data["attempt"])
    except (ValueError, KeyError, TypeError):  # no cursor yet, or one of an earlier version
        return None, 0


def _iso(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, UTC).isoformat(timespec="seconds")


def until_of(tag: str) -> float:
    """Unix time of an UNTIL_TAG value: ISO-8601, or the Unix seconds of runs tagged before."""
    try:
        return float(tag)
    except ValueError:
        return datetime.fromisoformat(tag).timestamp()


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[AGGREGATES],
        asset_checks=[aggregates_audit_check, poison_rows_check],
        jobs=[recalc_job(), chessboard_aggregates_audit],
        sensors=[project_aggregates_recalc_sensor],
        schedules=[chessboard_aggregates_audit_schedule],
    )

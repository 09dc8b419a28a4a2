"""The outbox relay in Dagster: the sweep job, its 5 s sensor, an hourly run that also purges, and
the freshness check of the events asset.

Thin shells over events/relay.py. The fast path is not here: the jobs that write outbox rows call
`relay_pending` right after their commit; this job sweeps whatever they left (broker down, a job
killed between commit and relay, rows written outside a job).
"""

import json
import time

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.defs.declare import SensorTick, running_sensor
from pin_chessboard_pipelines.defs.resources import (
    EVENTS_ASSET,
    LAG_CHECK,
    ChessboardResource,
    events_published,
    lag_evaluation,
)
from pin_chessboard_pipelines.defs.singleton import (
    graceful_interrupts,
    singleton_job,
    singleton_run_request,
    skip_while_active,
)
from pin_chessboard_pipelines.events.outbox import pending_summary, purge_published
from pin_chessboard_pipelines.events.relay import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_MESSAGE_TIMEOUT_MS,
    OutboxRelay,
    RelayResult,
    relay_policy,
)

JOB_NAME = "outbox_relay"
JOB_DESCRIPTION = "Outbox relay: publishes chessboard.outbox_messages rows to the pin.chessboard topics."
OP_NAME = "relay_outbox"
SENSOR_NAME = "outbox_relay_sensor"
PURGE_SCHEDULE_NAME = "outbox_relay_and_purge_hourly"
SINGLETON_VALUE = "outbox-relay"
TICK_SECONDS = 5
DEFAULT_TIME_BUDGET_SECONDS = 60.0
# Rows younger than this are the fast path's: a sweep for them would only find the lock busy.
FAST_PATH_GRACE_SECONDS = 2.0

EVENTS = dg.AssetSpec(
    EVENTS_ASSET,
    description=(
        "The pin.chessboard.*.v1 Kafka topics (docs/events.md), fed by the outbox relay from "
        "chessboard.outbox_messages. Every publish records a materialization (messages per topic, "
        "rate), whichever path published: a job's fast path after its commit or the relay job."
    ),
    group_name="outbox",
    kinds={"kafka", "postgres"},
    owners=["team:pin-platform-core"],
    # the import's stages, the recalc and handbook-sync write the events the relay publishes
    deps=["chessboard_aggregates", *(entity.asset for entity in entities.ENTITIES), "handbook_replica"],
)


class OutboxRelayConfig(dg.Config):
    until_empty: bool = Field(
        default=False,
        description="Keep publishing (and wait for a busy relay) until no pending row is left.",
    )
    time_budget_seconds: float = Field(
        default=DEFAULT_TIME_BUDGET_SECONDS,
        description="Stop after this many seconds; failures are retried with backoff within it.",
    )
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1, le=100_000)
    message_timeout_ms: int = Field(
        default=DEFAULT_MESSAGE_TIMEOUT_MS,
        ge=100,
        description="How long the producer tries to deliver a message before the batch counts as failed.",
    )
    purge: bool = Field(default=True, description="Purge published rows older than the retention.")
    bootstrap_servers: str | None = Field(
        default=None, description="Overrides KAFKA_BOOTSTRAP_SERVERS for this run."
    )


def _metadata(result: RelayResult, purged: int, backlog: dict[str, float]) -> dict[str, dg.MetadataValue]:
    return {
        "published": dg.MetadataValue.int(result.published),
        "batches": dg.MetadataValue.int(result.batches),
        "failed_attempts": dg.MetadataValue.int(result.failed_attempts),
        "messages_per_second": dg.MetadataValue.float(round(result.messages_per_second, 1)),
        "duration_seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        "purged": dg.MetadataValue.int(purged),
        "backlog": dg.MetadataValue.int(int(backlog["backlog"])),
        "oldest_pending_age_seconds": dg.MetadataValue.float(round(backlog["oldest_age_seconds"], 3)),
        "lock_busy": dg.MetadataValue.bool(result.lock_busy),
        "summary": dg.MetadataValue.json(
            {**result.as_dict(), "purged": purged, "backlog": int(backlog["backlog"])}
        ),
    }


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def relay_outbox(
    context: dg.OpExecutionContext, config: OutboxRelayConfig, chessboard: ChessboardResource
) -> dg.Output:
    """Publishes pending outbox rows to Kafka, then purges old published rows."""
    settings = chessboard.settings
    engine = chessboard.engine
    bootstrap = config.bootstrap_servers or settings.kafka_bootstrap_servers
    # one delivery attempt never outlasts the run's time budget
    message_timeout_ms = max(100, min(config.message_timeout_ms, int(config.time_budget_seconds * 1000)))
    with (
        graceful_interrupts() as interrupted,
        OutboxRelay(
            engine,
            bootstrap,
            batch_size=config.batch_size,
            message_timeout_ms=message_timeout_ms,
            policy=relay_policy(settings.import_page_retry_seconds),
        ) as relay,
    ):
        result = relay.relay_pending(
            until_empty=config.until_empty,
            max_seconds=config.time_budget_seconds,
            wait_for_lock=config.until_empty,
            should_stop=interrupted,
        )
        cancelled = result.stopped_early and interrupted()
    purged = purge_published(engine, settings.outbox_retention_seconds) if config.purge else 0
    backlog = pending_summary(engine)
    metadata = _metadata(result, purged, backlog)
    context.log.info(f"outbox relay: {json.dumps(result.as_dict())}, purged {purged}")
    if result.published:
        shared = ("published", "duration_seconds", "messages_per_second")
        extra = {key: value for key, value in metadata.items() if key not in shared}
        context.log_event(events_published(result.published, result.seconds, "relay job", **extra))
    elif result.failed_attempts:  # nothing reached Kafka: no new version of the topics
        context.log_event(dg.AssetObservation(asset_key=EVENTS.key, metadata=metadata))
    # every relay run (the sensor's, the hourly one) evaluates the lag check, whatever it published
    chessboard.report_lag(context, "relay job")
    if cancelled:
        raise dg.DagsterExecutionInterruptedError()
    if result.failed:
        raise dg.Failure(
            description=f"the broker did not acknowledge {int(backlog['backlog'])} pending row(s): {result.last_error}",
            metadata=metadata,
        )
    if result.lock_busy and config.until_empty:
        raise dg.Failure(
            description="another relay held the lock for the whole time budget", metadata=metadata
        )
    return dg.Output(None, metadata=metadata)


outbox_relay = singleton_job(JOB_NAME, relay_outbox, SINGLETON_VALUE, JOB_DESCRIPTION)


@running_sensor(SENSOR_NAME, TICK_SECONDS, job_name=JOB_NAME)
def outbox_relay_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource) -> SensorTick:
    """Every 5 s: requests a relay run when rows the fast path left are pending and none runs."""
    summary = pending_summary(chessboard.engine)
    backlog, age = int(summary["backlog"]), summary["oldest_age_seconds"]
    if backlog == 0:
        return dg.SkipReason("no pending outbox rows")
    if age < FAST_PATH_GRACE_SECONDS:
        return dg.SkipReason(f"{backlog} pending row(s), the oldest {age:.1f}s old: left to the fast path")
    busy = skip_while_active(context, JOB_NAME, f"{backlog} pending row(s); relay run")
    if busy:
        return busy
    return singleton_run_request(
        "outbox-relay", SINGLETON_VALUE, time.time(), {"pin/outbox-backlog": str(backlog)}
    )


# The sensor only runs the job when rows are pending; this run also purges on quiet days.
outbox_relay_and_purge_hourly = dg.ScheduleDefinition(
    name=PURGE_SCHEDULE_NAME,
    job=outbox_relay,
    cron_schedule="41 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)


@dg.asset_check(
    asset=EVENTS.key,
    name=LAG_CHECK,
    description="The oldest outbox row not yet on Kafka is younger than 5 minutes; evaluated with "
    "every publish (fast path or relay job) and every relay run (the sensor's, the hourly one).",
)
def outbox_lag_check(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    evaluation = lag_evaluation(pending_summary(chessboard.engine))
    return dg.AssetCheckResult(
        passed=evaluation.passed,
        severity=evaluation.severity,
        description=evaluation.description,
        metadata=evaluation.metadata,
    )


outbox_lag_check_job = dg.define_asset_job(
    "outbox_lag_check",
    selection=dg.AssetSelection.checks_for_assets(EVENTS.key),
    description="Runs the freshness check of the outbox relay.",
)


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[EVENTS],
        asset_checks=[outbox_lag_check],
        jobs=[outbox_relay, outbox_lag_check_job],
        sensors=[outbox_relay_sensor],
        schedules=[outbox_relay_and_purge_hourly],
    )

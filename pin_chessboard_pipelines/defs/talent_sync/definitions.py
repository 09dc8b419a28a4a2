"""talent-chessboard-sync in Dagster: the streaming consumer as a job, started by a sensor whenever
the Talent topics hold messages the consumer group has not committed.

Thin shell over talent_sync/. A sensor-started run consumes until it is caught up (or its time
budget ends); `pin-chessboard talent-sync` runs the same job without a budget until Ctrl-C.
"""

import time

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.consumers import ConsumerConfig, consume, result_metadata
from pin_chessboard_pipelines.defs.declare import SensorTick, running_sensor
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import (
    singleton_job,
    singleton_run_request,
    skip_while_active,
)
from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.talent.flag import talent_sync_disabled
from pin_chessboard_pipelines.talent_sync import SyncResult, TalentSync, group_lag, sync_running

JOB_NAME = "talent_sync"
JOB_DESCRIPTION = "talent-chessboard-sync: the streaming consumer of the six talent.chessboard.*.v1 topics."
OP_NAME = "consume_talent_topics"
SENSOR_NAME = "talent_sync_sensor"
SINGLETON_VALUE = "talent-sync"
TICK_SECONDS = 10
LAG_TAG = "pin/talent-sync-lag"


class TalentSyncConfig(ConsumerConfig):
    until_idle: bool = Field(default=True, description="End the run once every partition is caught up.")
    batch_size: int = Field(
        default=2000, ge=1, le=50_000, description="Messages per poll batch (one transaction)."
    )


# the result's counts in the run's metadata
COUNTS = ("messages", "applied", "skipped", "failed", "tombstones", "events", "batches", "retries")


def _metadata(result: SyncResult) -> dict[str, dg.MetadataValue]:
    rate = dg.MetadataValue.float(round(result.messages_per_second, 1))
    stopped = result.stopped.value if result.stopped else ""
    return result_metadata(result, COUNTS, stopped, messages_per_second=rate)


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def consume_talent_topics(
    context: dg.OpExecutionContext, config: TalentSyncConfig, chessboard: ChessboardResource
) -> dg.Output:
    """Applies the Talent topics' messages through the single apply path, committing offsets after
    each transaction."""
    settings = chessboard.settings
    disabled = talent_sync_disabled(settings)
    if disabled is not None:
        raise dg.Failure(description=disabled.line())
    result = consume(
        context, config, chessboard, TalentSync, batch_size=config.batch_size, **settings.recalc_timing
    )
    return dg.Output(None, metadata=_metadata(result))


talent_sync = singleton_job(JOB_NAME, consume_talent_topics, SINGLETON_VALUE, JOB_DESCRIPTION)


@running_sensor(SENSOR_NAME, TICK_SECONDS, job_name=JOB_NAME)
def talent_sync_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource) -> SensorTick:
    """Every 10 s: starts the sync job when the Talent topics hold uncommitted messages. The cursor
    shows the last tick's decision: the run it requested, or why it skipped (the flag is off, a sync run
    is active, a consumer runs outside Dagster, no Talent topics or no broker, caught up)."""
    decision = _decide(context, chessboard)
    # a skip reason shows only in a tooltip; the cursor (read by nothing) is on the sensor's page
    context.update_cursor(decision_line(decision))
    return decision


def decision_line(decision: SensorTick) -> str:
    if isinstance(decision, dg.SkipReason):
        return f"skipped: {decision.skip_message}"
    lags = [request.tags.get(LAG_TAG, "?") for request in decision.run_requests or []]
    return f"run requested: {', '.join(lags)} uncommitted message(s)"


def _decide(context: dg.SensorEvaluationContext, chessboard: ChessboardResource) -> SensorTick:
    settings = chessboard.settings
    disabled = talent_sync_disabled(settings)
    if disabled is not None:
        return dg.SkipReason(str(disabled))
    busy = skip_while_active(context, JOB_NAME, "sync run")
    if busy:
        return busy
    if sync_running(chessboard.engine):
        return dg.SkipReason("a talent-sync consumer runs outside Dagster (pin-chessboard talent-sync)")
    try:
        lag = group_lag(settings.kafka_bootstrap_servers, timeout=5)
    except Exception as error:  # noqa: BLE001 - the broker is down or the topics are missing: try on the next tick
        return dg.SkipReason(f"the Talent topics cannot be read: {error_line(error)}")
    if lag == 0:
        return dg.SkipReason("the consumer group is caught up")
    return singleton_run_request("talent-sync", SINGLETON_VALUE, time.time(), {LAG_TAG: str(lag)})


def definitions() -> dg.Definitions:
    return dg.Definitions(jobs=[talent_sync], sensors=[talent_sync_sensor])

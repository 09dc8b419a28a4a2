"""handbook-sync (HR-6) in Dagster: the consumer of the handbook topics as a job, started by a
singleton sensor whenever the topics hold messages the consumer group has not committed or a
republish is unfinished; the handbook replica as an asset upstream of pin_chessboard_events.

Thin shell over handbook_sync/ (docs/store.md#handbook-sync). `pin-chessboard handbook-sync` runs
the same job.
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
from pin_chessboard_pipelines.handbook_sync import (
    HandbookSync,
    HandbookSyncResult,
    handbook_group_lag,
    handbook_sync_running,
    republish_pending,
)
from pin_chessboard_pipelines.store.handbook import CITIES_TOPIC, REGIONS_TOPIC

JOB_NAME = "handbook_sync"
JOB_DESCRIPTION = (
    "handbook-sync: pin.handbook.regions.v1 / cities.v1 into the handbook replica, and the "
    "republish of the projects of a renamed region or city."
)
OP_NAME = "consume_handbook_topics"
SENSOR_NAME = "handbook_sync_sensor"
SINGLETON_VALUE = "handbook-sync"
TICK_SECONDS = 30
HANDBOOK_GROUP = "handbook"
HANDBOOK_REPLICA_ASSET = "handbook_replica"
SOURCE_KEYS = {
    REGIONS_TOPIC: dg.AssetKey(["handbook", "regions"]),
    CITIES_TOPIC: dg.AssetKey(["handbook", "cities"]),
}

HANDBOOK_SOURCES = [
    dg.AssetSpec(
        key,
        group_name=HANDBOOK_GROUP,
        kinds={"kafka"},
        description=f"The handbook service's compacted topic `{topic}`. External: the handbook owns it.",
    )
    for topic, key in SOURCE_KEYS.items()
]
HANDBOOK_REPLICA = dg.AssetSpec(
    HANDBOOK_REPLICA_ASSET,
    group_name=HANDBOOK_GROUP,
    kinds={"postgres"},
    description=(
        "chessboard.handbook_regions / handbook_cities: the display names project-upserted carries "
        "(docs/store.md#handbook-sync). handbook-sync applies the topics under their version guard "
        "and republishes the live projects of a renamed region or city; every run that changed it "
        "records a materialization."
    ),
    deps=list(SOURCE_KEYS.values()),
)


class HandbookSyncConfig(ConsumerConfig):
    until_idle: bool = Field(
        default=True, description="End the run once both topics are caught up and no republish is pending."
    )
    republish_batch_size: int = Field(
        default=500, ge=1, le=10_000, description="Projects per republish transaction."
    )


# the result's counts in the run's metadata
COUNTS = ("messages", "applied", "skipped", "failed", "renamed", "republished", "republish_batches")


def _metadata(result: HandbookSyncResult) -> dict[str, dg.MetadataValue]:
    longest = dg.MetadataValue.float(round(result.longest_transaction_seconds, 3))
    return result_metadata(result, COUNTS, result.stopped, longest_transaction_seconds=longest)


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def consume_handbook_topics(
    context: dg.OpExecutionContext, config: HandbookSyncConfig, chessboard: ChessboardResource
) -> dg.Output:
    """Applies the handbook topics to the replica and republishes the projects of what was renamed."""
    result = consume(
        context, config, chessboard, HandbookSync, republish_batch_size=config.republish_batch_size
    )
    if result.applied or result.republished:
        context.log_event(
            dg.AssetMaterialization(
                asset_key=HANDBOOK_REPLICA_ASSET,
                description=f"{result.applied} value(s) applied, {result.republished} project(s) republished",
                metadata=_metadata(result),
            )
        )
    return dg.Output(None, metadata=_metadata(result))


handbook_sync = singleton_job(JOB_NAME, consume_handbook_topics, SINGLETON_VALUE, JOB_DESCRIPTION)


@running_sensor(SENSOR_NAME, TICK_SECONDS, job_name=JOB_NAME)
def handbook_sync_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource) -> SensorTick:
    """Every 30 s: starts handbook-sync when the handbook topics hold uncommitted messages or a
    republish is unfinished."""
    busy = skip_while_active(context, JOB_NAME, "handbook-sync run")
    if busy:
        return busy
    engine = chessboard.engine
    if handbook_sync_running(engine):
        return dg.SkipReason("a handbook-sync consumer runs outside Dagster (pin-chessboard handbook-sync)")
    pending = republish_pending(engine)
    try:
        lag = handbook_group_lag(chessboard.settings.kafka_bootstrap_servers, timeout=5)
    except Exception as error:  # noqa: BLE001 - the broker is down or the topics are missing: try on the next tick
        if not pending:
            return dg.SkipReason(f"the handbook topics cannot be read: {error_line(error)}")
        lag = 0
    if lag == 0 and pending == 0:
        return dg.SkipReason("the consumer group is caught up and no republish is pending")
    return singleton_run_request(
        "handbook-sync",
        SINGLETON_VALUE,
        time.time(),
        {"pin/handbook-sync-lag": str(lag), "pin/handbook-republish-pending": str(pending)},
    )


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[*HANDBOOK_SOURCES, HANDBOOK_REPLICA], jobs=[handbook_sync], sensors=[handbook_sync_sensor]
    )

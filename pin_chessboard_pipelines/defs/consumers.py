"""What the jobs of the two consumers (talent-sync, handbook-sync) share in Dagster: the launchpad's
config, the consumer's run in the op and the metadata of its result."""

import json
from collections.abc import Callable, Iterable
from typing import Any

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import graceful_interrupts
from pin_chessboard_pipelines.events.consume_loop import BatchConsumer
from pin_chessboard_pipelines.retry import sync_policy

DEFAULT_TIME_BUDGET_SECONDS = 600.0  # a sensor-started run's; the CLI runs until stopped


class ConsumerConfig(dg.Config):
    """A consumer job's launchpad; each consumer says when it is idle and adds its own fields."""

    until_idle: bool = Field(default=True, description="End the run once caught up.")
    time_budget_seconds: float | None = Field(
        default=DEFAULT_TIME_BUDGET_SECONDS, description="End the run after this long; null = until stopped."
    )
    bootstrap_servers: str | None = Field(default=None, description="Overrides KAFKA_BOOTSTRAP_SERVERS.")


def result_metadata(
    result: Any, counts: Iterable[str], stopped: str, **more: dg.MetadataValue
) -> dict[str, dg.MetadataValue]:
    """A consumer run's metadata: the result's `counts`, `more`, its duration, how it stopped and
    its summary (`as_dict()`)."""
    return {
        **{name: dg.MetadataValue.int(getattr(result, name)) for name in counts},
        **more,
        "duration_seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        "stopped": dg.MetadataValue.text(stopped),
        "summary": dg.MetadataValue.json(result.as_dict()),
    }


def consume(
    context: dg.OpExecutionContext,
    config: ConsumerConfig,
    chessboard: ChessboardResource,
    consumer: Callable[..., BatchConsumer[Any]],
    **options: Any,
) -> Any:
    """The consumer run by this op until it is stopped, idle or out of time, a run termination
    stopping it between batches: its `options`, the run's servers and CorrelationId, and the sync
    policy (a store that restarts is ridden out as long as the import would). Returns its result."""
    settings = chessboard.settings
    servers = config.bootstrap_servers or settings.kafka_bootstrap_servers
    policy = sync_policy(settings.import_page_retry_seconds)
    running = consumer(chessboard.engine, servers, correlation_id=context.run_id, policy=policy, **options)
    with graceful_interrupts() as interrupted:
        result = running.run(
            until_idle=config.until_idle, max_seconds=config.time_budget_seconds, should_stop=interrupted
        )
    context.log.info(f"{running.name}: {json.dumps(result.as_dict(), ensure_ascii=False)}")
    if result.published:  # the fast path after each batch's commit
        chessboard.log_published(context, result.published, result.seconds, f"{running.name} fast path")
    return result

"""`replay_dead_letters`: the dead letters of talent-sync or handbook-sync applied again once their
cause is fixed (events/dead_letters.py, docs/events.md#dead-letters). Thin shell: the launchpad
names the consumer; the run's summary says what applied and what failed again."""

from typing import Literal

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.dead_letters.listing import list_dead_letters_job
from pin_chessboard_pipelines.defs.declare import one_op_job
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import graceful_interrupts
from pin_chessboard_pipelines.errors import ChessboardError
from pin_chessboard_pipelines.events.consume_loop import BatchConsumer
from pin_chessboard_pipelines.events.dead_letters import replay_dead_letters
from pin_chessboard_pipelines.handbook_sync import HandbookSync
from pin_chessboard_pipelines.talent.flag import talent_sync_disabled
from pin_chessboard_pipelines.talent_sync import TalentSync

JOB_NAME = "replay_dead_letters"
OP_NAME = "replay_dead_letter_messages"
Consumer = Literal["talent-sync", "handbook-sync"]


class ReplayDeadLettersConfig(dg.Config):
    consumer: Consumer = Field(
        description="Whose dead letters: talent-sync (pin-chessboard-talent-sync.dlq) or handbook-sync "
        "(pin-chessboard-handbook-sync.dlq)."
    )
    bootstrap_servers: str | None = Field(default=None, description="Overrides KAFKA_BOOTSTRAP_SERVERS.")


def _applier(consumer: Consumer, chessboard: ChessboardResource, servers: str, run_id: str) -> BatchConsumer:
    settings = chessboard.settings
    if consumer == "handbook-sync":
        return HandbookSync(chessboard.engine, servers, correlation_id=run_id, relay_events=False)
    disabled = talent_sync_disabled(settings)
    if disabled is not None:
        raise dg.Failure(description=disabled.line())
    return TalentSync(
        chessboard.engine,
        servers,
        **settings.recalc_timing,
        correlation_id=run_id,
        relay_events=False,
    )


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def replay_dead_letter_messages(
    context: dg.OpExecutionContext, config: ReplayDeadLettersConfig, chessboard: ChessboardResource
) -> dg.Output:
    """Each dead letter through the consumer's apply path, one transaction each; the ones that fail
    again go back to the end of the topic."""
    servers = config.bootstrap_servers or chessboard.settings.kafka_bootstrap_servers
    applier = _applier(config.consumer, chessboard, servers, context.run_id)
    try:
        with graceful_interrupts() as interrupted:
            result = replay_dead_letters(chessboard.engine, servers, applier, should_stop=interrupted)
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    if result.applied:
        chessboard.relay_outbox(context)
    summary = {"consumer": config.consumer, **result.as_dict()}
    context.log.info(
        f"replay-dlq {config.consumer}: {result.read} read, {result.applied} applied, "
        f"{result.failed_again} failed again"
    )
    return dg.Output(None, metadata={"summary": dg.MetadataValue.json(summary)})


replay_dead_letters_job = one_op_job(
    JOB_NAME,
    replay_dead_letter_messages,
    "The dead letters of talent-sync or handbook-sync applied again once their cause is fixed; "
    "the ones that still fail go back to the end of the dead-letter topic.",
)


def definitions() -> dg.Definitions:
    return dg.Definitions(jobs=[replay_dead_letters_job, list_dead_letters_job])

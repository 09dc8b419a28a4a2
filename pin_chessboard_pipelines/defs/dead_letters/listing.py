"""`list_dead_letters`: the dead letters of talent-sync and handbook-sync still waiting to be
replayed (events/dead_letter_listing.py, docs/events.md#dead-letters), for an operator in the UI
(the run's metadata: the count per consumer and a table of key, origin, error and age) and for
`pin-chessboard <consumer> dead-letters` (the same run; its summary on the last line of stdout).
Thin shell: reads only, writes nothing."""

from typing import Literal

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.declare import one_op_job
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.events.dead_letter_listing import (
    CONSUMER_GROUPS,
    LIST_LIMIT,
    letters_markdown,
    list_waiting,
)

JOB_NAME = "list_dead_letters"
OP_NAME = "list_waiting_dead_letters"


class ListDeadLettersConfig(dg.Config):
    consumer: Literal["all", "talent-sync", "handbook-sync"] = Field(
        default="all",
        description="Whose dead letters: talent-sync (pin-chessboard-talent-sync.dlq), handbook-sync "
        "(pin-chessboard-handbook-sync.dlq) or all of them.",
    )
    limit: int = Field(
        default=LIST_LIMIT,
        ge=0,
        le=10000,
        description="Dead letters listed per consumer (the count is all of them).",
    )
    bootstrap_servers: str | None = Field(default=None, description="Overrides KAFKA_BOOTSTRAP_SERVERS.")


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def list_waiting_dead_letters(
    context: dg.OpExecutionContext, config: ListDeadLettersConfig, chessboard: ChessboardResource
) -> dg.Output:
    """The dead letters in each dead-letter topic past its replay group's offsets, oldest first."""
    servers = config.bootstrap_servers or chessboard.settings.kafka_bootstrap_servers
    consumers = list(CONSUMER_GROUPS) if config.consumer == "all" else [config.consumer]
    listings = [list_waiting(servers, consumer, limit=config.limit) for consumer in consumers]
    for listing in listings:
        context.log.info(
            f"dead-letters-waiting Consumer={listing.consumer} Topic={listing.topic} "
            f"Waiting={listing.waiting} Listed={len(listing.letters)}"
        )
        for letter in listing.letters:
            context.log.warning(letter.line())
    waiting = sum(listing.waiting for listing in listings)
    metadata: dict[str, dg.MetadataValue] = {
        "waiting": dg.MetadataValue.int(waiting),
        **{f"waiting_{listing.consumer}": dg.MetadataValue.int(listing.waiting) for listing in listings},
        "dead_letters": dg.MetadataValue.md(letters_markdown(listings)),
        "summary": dg.MetadataValue.json(
            {"waiting": waiting, "consumers": [listing.as_dict() for listing in listings]}
        ),
    }
    return dg.Output(None, metadata=metadata)


list_dead_letters_job = one_op_job(
    JOB_NAME,
    list_waiting_dead_letters,
    "The dead letters of talent-sync and handbook-sync waiting to be replayed: key, origin "
    "topic/partition/offset, error and age, in the run's metadata (a table) and log; reads only.",
)

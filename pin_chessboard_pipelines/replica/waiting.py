"""The items that waited for a replayed dead letter's entity (docs/events.md#dead-letters).

A child whose new parent was dead-lettered meets CHESSBOARD_SYNC_PARENT_NOT_FOUND and is
quarantined by the streaming sync. When the dead letter is replayed and its entity is in the
replica, those children leave the quarantine and are applied through the one apply path in the
replay's transaction, and so are the items that waited for them in turn (a building's objects
behind a new project). An item that still fails is quarantined again with its new error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.entities import ENTITIES, Entity
from pin_chessboard_pipelines.errors import SYNC_PARENT_NOT_FOUND
from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult
from pin_chessboard_pipelines.replica.context import STREAMING_RUN_ID
from pin_chessboard_pipelines.replica.quarantine import take_waiting_items
from pin_chessboard_pipelines.replica.topic_items import apply_topic_items
from pin_chessboard_pipelines.talent.snapshots import external_id_of

Applied = Callable[[Entity, ApplyResult], None]


def parent_fields(child: Entity) -> dict[str, str]:
    """Parent entity -> the field of the child's snapshot naming its Talent id (projectId, ...)."""
    return {parent: f"{parent}Id" for parent in (child.parent, child.extra_parent) if parent is not None}


def apply_waiting_items(
    conn: Connection,
    present: Mapping[str, set[str]],
    contexts: Mapping[str, ApplyContext],
    applied: Applied,
    run_id: UUID = STREAMING_RUN_ID,
) -> int:
    """Applies, in the caller's transaction, the quarantined items of `run_id` that waited for the
    entities `present` (entity name -> Talent ids now in the replica), then those that waited for
    them, until none is left; `contexts` by entity name, `applied` gets each stage's result. The
    number of items taken from the quarantine."""
    frontier = {name: {i.lower() for i in ids} for name, ids in present.items() if ids}
    taken = 0
    for _level in ENTITIES:  # a level of the hierarchy each: the chain ends within six
        if not frontier:
            break
        found: dict[str, set[str]] = {}
        for child in ENTITIES:  # parent -> child
            items = []
            for parent, field in parent_fields(child).items():
                items += take_waiting_items(
                    conn, run_id, child.stage, SYNC_PARENT_NOT_FOUND, field, sorted(frontier.get(parent, ()))
                )
            if not items:
                continue
            taken += len(items)
            result = apply_topic_items(conn, child.name, items, contexts[child.name])
            applied(child, result)
            still = {str(external_id).lower() for external_id, _ in result.quarantined}
            ids = {str(external_id_of(item)).lower() for item in items if external_id_of(item)}
            found[child.name] = ids - still
        frontier = {name: ids for name, ids in found.items() if ids}
    return taken


__all__ = ["apply_waiting_items", "parent_fields"]

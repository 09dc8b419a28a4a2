"""Applying Talent snapshots to the replica: ONE path for ApiPull, TopicReplay and the streaming sync.

`apply_snapshots` runs inside the caller's transaction (one page = one transaction in the import,
one poll batch in the streaming sync) and writes, set-based (replica/database.py): replica upserts
with the version guard, quarantine rows, outbox events and one debounced recalc request per touched
project. A DryRun reads the same rows and decides alike but records into its memory instead
(replica/dry_run.py). The decisions themselves are replica/rules.py. A batch that holds one Talent
id more than once is applied in rounds (first occurrences, then second ones, ...), so it gives what
applying the items one by one would.

Metrics and warnings: quarantined items (chessboard_import_failed_items_total, `item-quarantined`),
unknown enum values and unresolved references of applied items (their counters and warnings). A
DryRun logs the same lines but moves no counter: nothing was stored.

Concurrency: the upsert repeats the version guard, so two writers of one entity never regress it;
a row that a concurrent writer advanced in between counts as skipped. Two concurrent batches may
both take one live number of a building: the partial unique index uq_property_objects_live_number
rejects the second, and the IntegrityError propagates on purpose - the caller rolls the page (or
poll batch) back and retries it, and the retry quarantines the duplicate. Old price/status in the
change events are read before the upsert without a row lock: a concurrent writer of the same object
between the two statements can make them stale, never the row.

Quarantine rows of the streaming sync (ctx.run_id None) carry STREAMING_RUN_ID, the nil UUID.

Ids travel as canonical UUID strings inside (talent/snapshots.py says why); ApplyResult and the
arguments keep uuid.UUID.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
    SYNC_IMMUTABLE_CHANGED,
    SYNC_STATUS_CONFLICT,
    SYNC_VALIDATION_FAILED,
)
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.replica import rules
from pin_chessboard_pipelines.replica.batch import Batch, Item
from pin_chessboard_pipelines.replica.columns import ReplicaEntity, replica_entity
from pin_chessboard_pipelines.replica.context import STREAMING_RUN_ID, ApplyContext, ApplyResult, DryRunState
from pin_chessboard_pipelines.replica.database import DatabaseView
from pin_chessboard_pipelines.replica.dry_run import DryRunView
from pin_chessboard_pipelines.replica.view import ReplicaView
from pin_chessboard_pipelines.talent.snapshots import (
    SnapshotError,
    canonical_uuid,
    external_id_of,
    parse_snapshot,
)
from pin_chessboard_pipelines.talent.topic_reader import SOURCE, Source, source_of

__all__ = [
    "STREAMING_RUN_ID",
    "ApplyContext",
    "ApplyResult",
    "DryRunState",
    "apply_snapshots",
    "apply_tombstones",
]

log = logging.getLogger(__name__)


def apply_snapshots(
    conn: Connection, entity: str, items: Sequence[dict[str, Any]], ctx: ApplyContext
) -> ApplyResult:
    """Applies one batch of snapshots of one entity (developer, project, building, layoutGroup,
    layout, propertyObject) in the caller's transaction."""
    batch = _batch(entity, ctx, len(items))
    if not items:
        return batch.result
    parsed_items: list[Item] = []
    for position, raw in enumerate(items):
        parsed = parse_snapshot(entity, raw, ctx.handbook)
        if isinstance(parsed, SnapshotError):
            batch.reject(position, raw, parsed.external_id, parsed.code, parsed.message)
        else:
            parsed_items.append(Item(position, parsed, raw, source=source_of(raw)))
    view = _view(conn, ctx)
    with view.session():
        existing = _read(view, batch.spec, parsed_items)
        batch.tombstones = view.tombstones(batch.spec, list(dict.fromkeys(i.talent_id for i in parsed_items)))
        view.request_recalcs(batch, _projects_to_change(view, batch, parsed_items, existing))
        for n, round_ in enumerate(rules.rounds(parsed_items)):
            if n:  # the rows the earlier rounds stored
                existing = _existing(view, batch.spec, round_)
            _apply_round(view, batch, round_, existing)
    _finish(view, batch)
    return batch.result


def apply_tombstones(
    conn: Connection,
    entity: str,
    talent_ids: Sequence[UUID | str | None],
    ctx: ApplyContext,
    sources: Sequence[Source | None] | None = None,
) -> ApplyResult:
    """A null Kafka value (tombstone): the entity was deleted in Talent -> soft delete + upserted event.

    An alive row gets deleted_at = now(), version + 1, its upserted event and a recalc request of
    its project; a missing or already deleted row is a no-op (skipped). Where each tombstone was
    read (`sources`, one per id) is kept for the key, row or no row: no snapshot read before it
    brings the entity back (docs/talent-source.md#deletes). A key that is no UUID is quarantined
    (CHESSBOARD_SYNC_VALIDATION_FAILED) like any other poison item."""
    batch = _batch(entity, ctx, len(talent_ids))
    valid: list[str] = []
    read_at: dict[str, Source] = {}
    for position, talent_id in enumerate(talent_ids):
        source = sources[position] if sources is not None else None
        try:
            if talent_id is None:
                raise ValueError("no key")
            valid.append(canonical_uuid(str(talent_id)))
            if source is not None:
                read_at[valid[-1]] = source  # message order: the last one of an id
        except ValueError:
            raw: dict[str, Any] = {"id": None if talent_id is None else str(talent_id), "tombstone": True}
            if source is not None:
                raw[SOURCE] = list(source)
            message = f"{entity} tombstone: the key is not a UUID"
            batch.reject(position, raw, external_id_of(raw), SYNC_VALIDATION_FAILED, message)
    ids = list(dict.fromkeys(valid))
    view = _view(conn, ctx)
    if ids:
        with view.session():
            alive = [r for r in view.existing_rows(batch.spec, ids).values() if r["deleted_at"] is None]
            projects = {p: t for row in alive for p, t in rules.touched_projects(entity, row, None)}
            spec_entity = batch.spec.entity
            linked = {i for row in alive for i in rules.linked_parent_ids(spec_entity, row, None)}
            projects.update(_linked_projects(view, spec_entity, linked).values())
            view.request_recalcs(batch, projects)
            view.delete(batch, ids)
            view.record_tombstones(batch, read_at)
    batch.result.skipped = batch.result.planned - batch.result.applied - batch.result.failed
    result = batch.result  # a tombstone's developer is not looked up: its figures count as unknown
    result.by_tenant = {"": [result.applied, result.skipped, result.failed]}
    _finish(view, batch)
    return batch.result


def _batch(entity: str, ctx: ApplyContext, planned: int) -> Batch:
    spec = replica_entity(entity)
    return Batch(spec, ctx, ctx.stage or spec.entity.stage, ApplyResult(planned=planned))


def _view(conn: Connection, ctx: ApplyContext) -> ReplicaView:
    if not ctx.dry_run:
        return DatabaseView(conn)
    if ctx.dry_run_state is None:
        ctx.dry_run_state = DryRunState()
    return DryRunView(conn, ctx.dry_run_state)


def _read(view: ReplicaView, spec: ReplicaEntity, items: list[Item]) -> dict[str, dict[str, Any]]:
    """Before any write, for the request of the recalcs and the first round: the current rows of the
    batch's Talent ids (returned), and its parents' rows, which decide each item's parent columns
    and `rejected` once (a batch of one entity never writes its parents' tables; a later round
    re-reads only the current rows). Read without a lock, as before every upsert: the upsert
    repeats the version guard."""
    entity = spec.entity
    for item in items:
        item.values = dict(item.record.columns)  # the upsert's parameters; check_parents fills the rest
    parents = _parent_rows(view, entity.parent, entity.parent_column, items)
    extra_parents = _parent_rows(view, entity.extra_parent, entity.extra_parent_column, items)
    for item in items:
        item.rejected = rules.check_parents(entity, item.values, item.record, parents, extra_parents)
    return _existing(view, spec, items)


def _existing(view: ReplicaView, spec: ReplicaEntity, items: list[Item]) -> dict[str, dict[str, Any]]:
    return view.existing_rows(spec, list(dict.fromkeys(item.record.talent_id for item in items)))


def _projects_to_change(
    view: ReplicaView, batch: Batch, items: list[Item], existing: dict[str, dict[str, Any]]
) -> dict[str, str]:
    """The projects (PIN id -> tenant id) the batch is about to change, old and new ones of a move,
    read before any write so their recalc requests are locked first (the drain's lock order:
    queue row, then the project's rows). Items the version guard or a missing parent will stop
    request nothing."""
    entity = batch.spec.entity
    if entity.name == "developer" or not items:
        return {}
    projects: dict[str, str] = {}
    linked: set[str] = set()
    for item in items:
        if item.rejected is not None or _deleted_later(batch, item):
            continue
        old = existing.get(item.talent_id)
        if rules.is_stale(old, item.record.version) or rules.owner_changed(entity.name, item.values, old):
            continue
        projects.update(rules.touched_projects(entity.name, item.values, old))
        linked |= rules.linked_parent_ids(entity, item.values, old)
    batch.linked = _linked_projects(view, entity, linked)
    projects.update(batch.linked.values())
    return projects


def _linked_projects(view: ReplicaView, entity: entities.Entity, ids: set[str]) -> dict[str, tuple[str, str]]:
    if entity.extra_parent is None or not ids:
        return {}
    return view.linked_projects(entities.BY_NAME[entity.extra_parent], ids)


def _apply_round(
    view: ReplicaView, batch: Batch, items: list[Item], existing: dict[str, dict[str, Any]]
) -> None:
    """One round: every Talent id at most once."""
    entity = batch.spec.entity
    decided: list[Item] = []
    for item in items:
        if item.rejected is not None:
            batch.reject(item.position, item.raw, item.talent_id, *item.rejected, tenant=item.tenant)
            continue
        item.old = old = existing.get(item.talent_id)
        if _deleted_later(batch, item) or rules.is_stale(old, item.record.version):
            batch.skipped(item.tenant)
            continue
        changed = rules.owner_changed(entity.name, item.values, old)
        if changed is not None:
            batch.reject(
                item.position, item.raw, item.talent_id, SYNC_IMMUTABLE_CHANGED, changed, tenant=item.tenant
            )
            continue
        conflict = rules.status_conflict(entity.name, item.values, old)
        if conflict is not None:
            batch.reject(
                item.position, item.raw, item.talent_id, SYNC_STATUS_CONFLICT, conflict, tenant=item.tenant
            )
            continue
        decided.append(item)
    if entity.name == "propertyObject":
        decided = _live_numbers(view, batch, decided)
    if decided:
        view.store(batch, decided)
        recreated = [item.talent_id for item in decided if batch.tombstones.pop(item.talent_id, None)]
        view.forget_tombstones(batch, recreated)


def _deleted_later(batch: Batch, item: Item) -> bool:
    """A tombstone read after the snapshot (docs/talent-source.md#deletes): it changes nothing."""
    return rules.superseded_by_delete(item.source, batch.tombstones.get(item.talent_id))


def _parent_rows(
    view: ReplicaView, parent: str | None, column: str | None, items: list[Item]
) -> dict[str, dict[str, Any]]:
    """Parent PIN id -> parent row, for the parents that exist (soft-deleted ones count)."""
    if parent is None or column is None:
        return {}
    return rules.with_developer_tenants(parent, view.parent_rows(entities.BY_NAME[parent], column, items))


def _live_numbers(view: ReplicaView, batch: Batch, decided: list[Item]) -> list[Item]:
    """A number is unique among the live objects of a building (docs/store.md#replica-tables)."""
    wanted = rules.wanted_numbers(decided)
    taken = view.live_number_holders(sorted(wanted)) if wanted else {}
    kept, rejected = rules.claim_live_numbers(decided, taken)
    for item, message in rejected:
        batch.reject(
            item.position, item.raw, item.talent_id, SYNC_DUPLICATE_NUMBER, message, tenant=item.tenant
        )
    view.keep_numbers(taken)
    return kept


def _finish(view: ReplicaView, batch: Batch) -> None:
    result = batch.result
    batch.quarantine.sort(key=lambda q: q.position)
    view.write(batch)  # drops the quarantine rows of messages quarantined already (a batch read again)
    result.quarantined = [(q.external_id, q.code) for q in batch.quarantine]
    for q in batch.quarantine:
        log_event(log, logging.WARNING, "item-quarantined", **batch.log_fields(), **q.log_fields())
    result.touched_projects = {(UUID(p), UUID(t)) for p, t in batch.touched.items()}

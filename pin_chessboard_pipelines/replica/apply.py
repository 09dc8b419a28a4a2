"""Applying Talent snapshots to the replica: ONE path for ApiPull, TopicReplay and the streaming sync.

`apply_snapshots` runs inside the caller's transaction (one page = one transaction in the import,
one poll batch in the streaming sync) and writes, set-based: replica upserts with the version guard,
quarantine rows, outbox events and one debounced recalc request per touched project.

Per batch a constant number of statements (store/sql/replica.sql): the current rows of the batch's
ids, one query per parent table, the live-number holders (property objects), one multi-row upsert,
then one INSERT of the quarantine rows, one COPY of the outbox rows and one `enqueue_recalc`.
Column values go as one array literal per column (`unnest`), never one round trip per row. A batch
that holds one Talent id more than once is applied in rounds (first occurrences, then second ones,
...), so it gives what applying the items one by one would.

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

import io
import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

import psycopg2
from psycopg2.extensions import new_type, register_type
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
    SYNC_PARENT_MISMATCH,
    SYNC_PARENT_NOT_FOUND,
    SYNC_STATUS_CONFLICT,
    SYNC_VALIDATION_FAILED,
)
from pin_chessboard_pipelines.events import payloads
from pin_chessboard_pipelines.events.outbox import write_outbox_batch
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.observability.metrics import (
    IMPORT_FAILED_ITEMS,
    SYNC_UNKNOWN_ENUM,
    SYNC_UNRESOLVED_REFERENCE,
)
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.enqueue import enqueue_recalc
from pin_chessboard_pipelines.store.queries import raw_queries
from pin_chessboard_pipelines.talent.snapshots import (
    ERROR_MESSAGE_LIMIT,
    SnapshotError,
    TalentRecord,
    canonical_uuid,
    external_id_of,
    parse_snapshot,
    pin_id_text,
)
from pin_chessboard_pipelines.talent.topics import STAGE_BY_ENTITY

log = logging.getLogger(__name__)

STREAMING_RUN_ID = UUID(int=0)  # run_id of quarantine rows written by the streaming sync
TALENT_SYNC = "TalentSync"  # status_source of replicated statuses; source of price/status events
# A PIN-side hold that a Talent `Sold` must not silently override (CHESSBOARD_SYNC_STATUS_CONFLICT).
HELD_STATUSES = frozenset({"Reserved", "Booked"})


class _Seen(NamedTuple):
    """What later lookups need of a row a DryRun 'stored' (a tuple: a DryRun of a million objects
    keeps a million of these)."""

    replica_version: int
    version: int
    deleted_at: datetime | None
    project_id: str | None
    tenant_id: str | None
    building_id: str | None
    number: str | None
    status: str | None
    status_source: str | None


@dataclass
class DryRunState:
    """What a DryRun has 'applied' so far, so later stages see parents and duplicate numbers as a
    real run would (operations.md, "Import result"). Shared by the workers of one run: an apply
    holds `lock` from its first read to its last decision."""

    seen: dict[str, dict[str, _Seen]] = field(default_factory=dict)  # entity -> Talent id -> row facts
    # (building PIN id, number) -> Talent id of the live object holding it; None = released.
    numbers: dict[tuple[str, str], str | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)


@dataclass
class ApplyContext:
    correlation_id: str
    handbook: Handbook
    debounce_seconds: float
    cap_seconds: float
    run_id: UUID | None = None  # import run (quarantine rows carry it); None in the streaming sync
    stage: str = ""  # Developers .. PropertyObjects
    dry_run: bool = False
    dry_run_state: DryRunState | None = None


@dataclass
class ApplyResult:
    planned: int = 0  # items read from the source
    applied: int = 0  # created or changed
    skipped: int = 0  # no-op by the version guard
    failed: int = 0  # quarantined
    touched_projects: set[tuple[UUID, UUID]] = field(default_factory=set)  # (project PIN id, tenant id)
    events: int = 0  # outbox rows written
    unknown_enums: list[tuple[str, str]] = field(default_factory=list)  # (enum, value)
    quarantined: list[tuple[str | None, str]] = field(default_factory=list)  # (external id, error code)
    created: int = 0  # of `applied`, the new rows
    unresolved_references: list[str] = field(default_factory=list)  # "regionId" / "cityId"


@dataclass(frozen=True)
class _Entity:
    name: str  # talent-source.md entity
    table: str
    parent: str | None  # required parent entity
    extra_parent: str | None  # optional parent entity (layout group of a layout, layout of an object)
    upsert_columns: tuple[str, ...]  # array parameters of upsert_<table>, in replica.sql order
    event_type: str
    payload: Callable[[Mapping[str, Any], Handbook], dict[str, Any]]
    existing_columns: tuple[str, ...] = ("project_id", "tenant_id")  # read besides _EXISTING


_COMMON = ("id", "external_talent_id", "replica_version", "deleted_at")
_EXISTING = ("id", "external_talent_id", "replica_version", "version", "deleted_at")
# Upsert columns whose values are free text (quoted in array literals); the others are ids,
# numbers and timestamps.
_TEXT_COLUMNS = frozenset({"name", "inn", "type", "class", "construction_status", "number", "status"})
ENTITIES: dict[str, _Entity] = {
    e.name: e
    for e in (
        _Entity(
            "developer",
            "developers",
            None,
            None,
            (*_COMMON, "name", "inn"),
            payloads.DEVELOPER_UPSERTED,
            lambda row, hb: payloads.developer_upserted(row),
            (),
        ),
        _Entity(
            "project",
            "projects",
            "developer",
            None,
            (
                *_COMMON,
                "tenant_id",
                "developer_id",
                "name",
                "type",
                "class",
                "construction_status",
                "country_id",
                "region_id",
                "city_id",
                "stars",
                "currency_id",
                "payback_years",
            ),
            payloads.PROJECT_UPSERTED,
            payloads.project_upserted,
            ("tenant_id",),
        ),
        _Entity(
            "building",
            "buildings",
            "project",
            None,
            (*_COMMON, "tenant_id", "project_id", "name", "floors_count"),
            payloads.BUILDING_UPSERTED,
            lambda row, hb: payloads.building_upserted(row),
        ),
        _Entity(
            "layoutGroup",
            "layout_groups",
            "project",
            None,
            (*_COMMON, "tenant_id", "project_id", "name", "rooms"),
            payloads.LAYOUT_GROUP_UPSERTED,
            lambda row, hb: payloads.layout_group_upserted(row),
        ),
        _Entity(
            "layout",
            "layouts",
            "project",
            "layoutGroup",
            (*_COMMON, "tenant_id", "project_id", "layout_group_id", "name", "rooms", "total_area"),
            payloads.LAYOUT_UPSERTED,
            lambda row, hb: payloads.layout_upserted(row),
        ),
        _Entity(
            "propertyObject",
            "property_objects",
            "building",
            "layout",
            (
                *_COMMON,
                "tenant_id",
                "project_id",
                "building_id",
                "layout_id",
                "number",
                "floor",
                "section",
                "status",
                "price",
                "total_area",
            ),
            payloads.PROPERTY_OBJECT_UPSERTED,
            lambda row, hb: payloads.property_object_upserted(row),
            ("project_id", "tenant_id", "building_id", "number", "status", "status_source", "price"),
        ),
    )
}

# The PIN-id column of a child that names each parent entity.
_PARENT_COLUMN = {
    "developer": "developer_id",
    "project": "project_id",
    "building": "building_id",
    "layoutGroup": "layout_group_id",
    "layout": "layout_id",
}


def _entity(name: str) -> _Entity:
    try:
        return ENTITIES[name]
    except KeyError:
        raise ValueError(f"unknown Talent entity {name!r}: expected one of {', '.join(ENTITIES)}") from None


class _Event(NamedTuple):
    event_type: str  # e.g. pin.chessboard.project-upserted
    aggregate_id: str  # PIN id = Kafka key
    payload: dict[str, Any]


@dataclass
class _Quarantine:
    position: int  # in the batch: quarantine rows are written in batch order
    raw: Any
    external_id: str | None
    code: str
    message: str


@dataclass
class _Batch:
    """Everything one apply call collects before its final writes."""

    entity: _Entity
    ctx: ApplyContext
    stage: str
    result: ApplyResult
    quarantine: list[_Quarantine] = field(default_factory=list)
    events: list[_Event] = field(default_factory=list)
    touched: dict[str, str] = field(default_factory=dict)  # project PIN id -> tenant id

    def reject(self, position: int, raw: Any, external_id: str | None, code: str, message: str) -> None:
        self.quarantine.append(_Quarantine(position, raw, external_id, code, message[:ERROR_MESSAGE_LIMIT]))
        self.result.failed += 1


def apply_snapshots(
    conn: Connection, entity: str, items: Sequence[dict[str, Any]], ctx: ApplyContext
) -> ApplyResult:
    """Applies one batch of snapshots of one entity (developer, project, building, layoutGroup,
    layout, propertyObject) in the caller's transaction."""
    spec = _entity(entity)
    batch = _Batch(spec, ctx, ctx.stage or STAGE_BY_ENTITY[entity].name, ApplyResult(planned=len(items)))
    if not items:
        return batch.result
    items_: list[_Item] = []
    for position, raw in enumerate(items):
        parsed = parse_snapshot(entity, raw, ctx.handbook)
        if isinstance(parsed, SnapshotError):
            batch.reject(position, raw, parsed.external_id, parsed.code, parsed.message)
        else:
            items_.append(_Item(position, parsed, raw))
    if ctx.dry_run:
        state = _dry_state(ctx)
        with state.lock:
            for round_ in _rounds(items_):
                _apply_round(conn, batch, round_, state)
    else:
        _begin(conn)
        for round_ in _rounds(items_):
            _apply_round(conn, batch, round_, None)
    _finish(conn, batch)
    return batch.result


def apply_tombstones(
    conn: Connection, entity: str, talent_ids: Sequence[UUID | str | None], ctx: ApplyContext
) -> ApplyResult:
    """A null Kafka value (tombstone): the entity was deleted in Talent -> soft delete + upserted event.

    An alive row gets deleted_at = now(), version + 1, its upserted event and a recalc request of
    its project; a missing or already deleted row is a no-op (skipped). A key that is no UUID is
    quarantined (CHESSBOARD_SYNC_VALIDATION_FAILED) like any other poison item."""
    spec = _entity(entity)
    batch = _Batch(spec, ctx, ctx.stage or STAGE_BY_ENTITY[entity].name, ApplyResult(planned=len(talent_ids)))
    valid: list[str] = []
    for position, talent_id in enumerate(talent_ids):
        try:
            if talent_id is None:
                raise ValueError("no key")
            valid.append(canonical_uuid(str(talent_id)))
        except ValueError:
            raw = {"id": None if talent_id is None else str(talent_id), "tombstone": True}
            message = f"{entity} tombstone: the key is not a UUID"
            batch.reject(position, raw, external_id_of(raw), SYNC_VALIDATION_FAILED, message)
    ids = list(dict.fromkeys(valid))
    if ids and ctx.dry_run:
        state = _dry_state(ctx)
        with state.lock:
            existing = _existing_rows(conn, spec, ids, state)
            now = datetime.now(UTC)
            for talent_id in ids:
                row = existing.get(talent_id)
                if row is None or row["deleted_at"] is not None:
                    continue
                stored = {**row, "deleted_at": now, "version": row["version"] + 1}
                _remember(state, spec, talent_id, stored, row)
                _touch(batch, spec, stored)
                batch.result.applied += 1
    elif ids:
        _begin(conn)
        query = raw_queries("replica")["tombstone_rows"].format(table=spec.table)
        with _cursor(conn) as cur:
            cur.execute(query, {"ids": ids})
            rows = _fetch_rows(cur)
        for row in rows:
            batch.events.append(_event(batch, spec.event_type, row, spec.payload(row, ctx.handbook)))
            _touch(batch, spec, row)
        batch.result.applied = len(rows)
    batch.result.skipped = batch.result.planned - batch.result.applied - batch.result.failed
    _finish(conn, batch)
    return batch.result


# ---------------------------------------------------------------------------------------------
# One round: every Talent id at most once


@dataclass
class _Item:
    position: int  # in the batch
    record: TalentRecord
    raw: Any
    values: dict[str, Any] = field(default_factory=dict)  # upsert parameters
    old: dict[str, Any] | None = None  # the current row, None = create

    @property
    def talent_id(self) -> str:
        return self.values["external_talent_id"]


def _rounds(items: list[_Item]) -> list[list[_Item]]:
    rounds: list[list[_Item]] = []
    occurrences: dict[str, int] = {}
    for item in items:
        n = occurrences.get(item.record.talent_id, 0)
        occurrences[item.record.talent_id] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(item)
    return rounds


def _apply_round(conn: Connection, batch: _Batch, items: list[_Item], state: DryRunState | None) -> None:
    spec = batch.entity
    for item in items:
        item.values = dict(item.record.columns)
    existing = _existing_rows(conn, spec, [item.talent_id for item in items], state)
    parents = _parent_rows(conn, spec.parent, items, state)
    extra_parents = _parent_rows(conn, spec.extra_parent, items, state)
    decided: list[_Item] = []
    for item in items:
        if not _with_parents(batch, spec, item, parents, extra_parents):
            continue
        item.old = old = existing.get(item.talent_id)
        if old is not None and old["replica_version"] >= item.record.version:
            batch.result.skipped += 1
            continue
        if (
            spec.name == "propertyObject"
            and old is not None
            and item.values["status"] == "Sold"
            and old["status"] in HELD_STATUSES
            and old["status_source"] != TALENT_SYNC
        ):
            batch.reject(
                item.position,
                item.raw,
                item.talent_id,
                SYNC_STATUS_CONFLICT,
                f"propertyObject status: Talent says Sold, PIN holds it {old['status']} "
                f"(status source {old['status_source']})",
            )
            continue
        decided.append(item)
    if spec.name == "propertyObject":
        decided = _live_numbers(conn, batch, decided, state)
    if not decided:
        return
    if state is None:
        _upsert(conn, batch, decided)
    else:
        _dry_apply(batch, decided, state)


def _with_parents(
    batch: _Batch,
    spec: _Entity,
    item: _Item,
    parents: dict[str, dict[str, Any]],
    extra_parents: dict[str, dict[str, Any]],
) -> bool:
    """Fills the columns the parent rows give (tenant, project of an object); False = quarantined."""
    if spec.parent is None:
        return True
    values, record = item.values, item.record
    parent = parents.get(values[_PARENT_COLUMN[spec.parent]])
    if parent is None:
        batch.reject(
            item.position,
            item.raw,
            item.talent_id,
            SYNC_PARENT_NOT_FOUND,
            f"{spec.name}: {spec.parent} {record.parents[spec.parent]} is not in the replica",
        )
        return False
    if spec.name == "propertyObject":
        values["project_id"] = parent["project_id"]
    values["tenant_id"] = parent["tenant_id"]
    if spec.extra_parent is None or spec.extra_parent not in record.parents:
        return True
    extra = extra_parents.get(values[_PARENT_COLUMN[spec.extra_parent]])
    talent_extra = record.parents[spec.extra_parent]
    if extra is None:
        batch.reject(
            item.position,
            item.raw,
            item.talent_id,
            SYNC_PARENT_NOT_FOUND,
            f"{spec.name}: {spec.extra_parent} {talent_extra} is not in the replica",
        )
        return False
    if extra["project_id"] != values["project_id"]:
        batch.reject(
            item.position,
            item.raw,
            item.talent_id,
            SYNC_PARENT_MISMATCH,
            f"{spec.name}: {spec.extra_parent} {talent_extra} belongs to another project",
        )
        return False
    return True


def _live_numbers(
    conn: Connection, batch: _Batch, decided: list[_Item], state: DryRunState | None
) -> list[_Item]:
    """A number is unique among the live objects of a building: the one applied first keeps it,
    in batch order and against the replica; the other is quarantined (talent-source.md)."""
    wanted = {
        (i.values["building_id"], i.values["number"]) for i in decided if i.values["deleted_at"] is None
    }
    taken: dict[tuple[str, str], str | None] = {}
    if wanted:
        keys = sorted(wanted)
        with _cursor(conn) as cur:
            cur.execute(
                raw_queries("replica")["live_number_holders"],
                {"building_ids": [k[0] for k in keys], "numbers": [k[1] for k in keys]},
            )
            for building_id, number, holder in cur.fetchall():
                taken[(building_id, number)] = holder
        if state is not None:
            taken.update({k: state.numbers[k] for k in keys if k in state.numbers})
    kept = []
    for item in decided:
        values, old, own = item.values, item.old, item.talent_id
        key = (values["building_id"], values["number"])
        live = values["deleted_at"] is None
        holder = taken.get(key)
        if live and holder is not None and holder != own:
            batch.reject(
                item.position,
                item.raw,
                own,
                SYNC_DUPLICATE_NUMBER,
                f"propertyObject number {values['number']!r} is already taken by live object "
                f"{holder} in building {values['building_id']}",
            )
            continue
        if old is not None and old["deleted_at"] is None:
            old_key = (old["building_id"], old["number"])
            if old_key != key or not live:
                taken[old_key] = None
        if live:
            taken[key] = own
        kept.append(item)
    if state is not None:
        state.numbers.update(taken)
    return kept


def _upsert(conn: Connection, batch: _Batch, decided: list[_Item]) -> None:
    spec, ctx = batch.entity, batch.ctx
    params = {
        column: array_literal([item.values[column] for item in decided], column in _TEXT_COLUMNS)
        for column in spec.upsert_columns
    }
    with _cursor(conn) as cur:
        cur.execute(raw_queries("replica")[f"upsert_{spec.table}"], params)
        returned = {row["external_talent_id"]: row for row in _fetch_rows(cur)}
    for item in decided:
        row = returned.get(item.talent_id)
        if row is None:  # a concurrent writer applied a newer version in between
            batch.result.skipped += 1
            continue
        inserted = row.pop("inserted")
        batch.result.applied += 1
        batch.result.created += bool(inserted)
        _report(batch, item.record)
        batch.events.append(_event(batch, spec.event_type, row, spec.payload(row, ctx.handbook)))
        if spec.name == "propertyObject":
            batch.events.extend(_object_change_events(batch, row, None if inserted else item.old))
        _touch(batch, spec, row)


def _object_change_events(batch: _Batch, row: dict[str, Any], old: dict[str, Any] | None) -> list[_Event]:
    """price-changed when the price changed (on create: the initial price point, if any);
    status-changed when the status changed (on create: only an imported Sold)."""
    events = []
    old_price = None if old is None else old["price"]
    if (row["price"] is not None) if old is None else (old_price != row["price"]):
        payload = payloads.property_object_price_changed(row, old_price, TALENT_SYNC)
        events.append(_event(batch, payloads.PROPERTY_OBJECT_PRICE_CHANGED, row, payload))
    old_status = None if old is None else old["status"]
    if (row["status"] == "Sold") if old is None else (old_status != row["status"]):
        payload = payloads.property_object_status_changed(row, old_status, TALENT_SYNC)
        events.append(_event(batch, payloads.PROPERTY_OBJECT_STATUS_CHANGED, row, payload))
    return events


def _dry_apply(batch: _Batch, decided: list[_Item], state: DryRunState) -> None:
    """What the upsert would store, kept in the DryRun state instead of the replica."""
    spec = batch.entity
    for item in decided:
        old = item.old
        stored = {**(old or {}), **item.values, "version": 1 if old is None else old["version"] + 1}
        if spec.name == "propertyObject":
            stored["status_source"] = TALENT_SYNC
        _remember(state, spec, item.talent_id, stored, old)
        batch.result.applied += 1
        batch.result.created += old is None
        _report(batch, item.record)
        _touch(batch, spec, stored)


def _remember(
    state: DryRunState, spec: _Entity, talent_id: str, stored: dict[str, Any], old: dict[str, Any] | None
) -> None:
    state.seen.setdefault(spec.name, {})[talent_id] = _Seen(
        stored["replica_version"],
        stored["version"],
        stored["deleted_at"],
        stored.get("project_id"),
        stored.get("tenant_id"),
        stored.get("building_id"),
        stored.get("number"),
        stored.get("status"),
        stored.get("status_source"),
    )
    if spec.name != "propertyObject" or old is None or old["deleted_at"] is not None:
        return
    if stored["deleted_at"] is not None:  # a delete (tombstone) releases the number
        key, own = (old["building_id"], old["number"]), old["external_talent_id"]
        if state.numbers.get(key, own) == own:
            state.numbers[key] = None


# ---------------------------------------------------------------------------------------------
# Reads


def _existing_rows(
    conn: Connection, spec: _Entity, talent_ids: list[str], state: DryRunState | None
) -> dict[str, dict[str, Any]]:
    """Talent id -> current row (the DryRun's own rows over the replica's)."""
    columns = ", ".join(f'"{c}"' for c in (*_EXISTING, *spec.existing_columns))
    query = raw_queries("replica")["existing_rows"].format(table=spec.table, columns=columns)
    with _cursor(conn) as cur:
        cur.execute(query, {"ids": talent_ids})
        rows = {row["external_talent_id"]: row for row in _fetch_rows(cur)}
    if state is not None:
        seen = state.seen.get(spec.name, {})
        for talent_id in talent_ids if seen else ():
            mine = seen.get(talent_id)
            if mine is not None:
                rows[talent_id] = _seen_row(spec.name, talent_id, mine)
    return rows


def _seen_row(entity: str, talent_id: str, seen: _Seen) -> dict[str, Any]:
    return {**seen._asdict(), "id": pin_id_text(entity, talent_id), "external_talent_id": talent_id}


def _parent_rows(
    conn: Connection, parent: str | None, items: list[_Item], state: DryRunState | None
) -> dict[str, dict[str, Any]]:
    """Parent PIN id -> parent row, for the parents that exist (soft-deleted ones count)."""
    if parent is None:
        return {}
    column = _PARENT_COLUMN[parent]
    ids = sorted({item.values[column] for item in items if item.values.get(column) is not None})
    if not ids:
        return {}
    query = raw_queries("replica")["parent_rows"].format(table=ENTITIES[parent].table)
    with _cursor(conn) as cur:
        cur.execute(query, {"ids": ids})
        rows = {row["id"]: row for row in _fetch_rows(cur)}
    if state is not None and state.seen.get(parent):
        seen = state.seen[parent]
        wanted = {item.record.parents[parent] for item in items if parent in item.record.parents}
        for talent_id in wanted:
            if talent_id in seen:
                row = _seen_row(parent, talent_id, seen[talent_id])
                rows[row["id"]] = row
    if parent == "developer":  # tenant boundary = developer
        for row in rows.values():
            row["tenant_id"] = row["id"]
    return rows


# ---------------------------------------------------------------------------------------------
# Writes and reports


def _finish(conn: Connection, batch: _Batch) -> None:
    ctx, result = batch.ctx, batch.result
    batch.quarantine.sort(key=lambda q: q.position)
    result.quarantined = [(q.external_id, q.code) for q in batch.quarantine]
    for q in batch.quarantine:
        _log(
            logging.WARNING,
            "item-quarantined",
            RunId=ctx.run_id,
            Stage=batch.stage,
            ExternalId=q.external_id,
            CorrelationId=ctx.correlation_id,
            ErrorCode=q.code,
            DryRun=ctx.dry_run,
            Error=q.message,
        )
    result.touched_projects = {(UUID(p), UUID(t)) for p, t in batch.touched.items()}
    if ctx.dry_run:
        return
    if batch.quarantine:
        with _cursor(conn) as cur:
            cur.execute(
                raw_queries("replica")["insert_failed_items"],
                {
                    "run_id": str(ctx.run_id or STREAMING_RUN_ID),
                    "stage": batch.stage,
                    "external_ids": [q.external_id for q in batch.quarantine],
                    "error_codes": [q.code for q in batch.quarantine],
                    "error_messages": [q.message for q in batch.quarantine],
                    "payloads": [_payload_json(q.raw) for q in batch.quarantine],
                },
            )
        IMPORT_FAILED_ITEMS.inc(len(batch.quarantine))
    result.events = write_outbox_batch(conn, batch.events, batch.ctx.correlation_id)
    if batch.touched:
        enqueue_recalc(
            conn,
            result.touched_projects,
            RecalcReason.TALENT_SYNC,
            debounce_seconds=ctx.debounce_seconds,
            cap_seconds=ctx.cap_seconds,
        )


def _report(batch: _Batch, record: TalentRecord) -> None:
    """Unknown enum values and unresolved references of an applied item: warning + metric."""
    ctx = batch.ctx
    for enum, value in record.unknown_enums:
        batch.result.unknown_enums.append((enum, value))
        _log(
            logging.WARNING,
            "unknown-enum-value",
            Enum=enum,
            Value=value,
            ExternalId=record.talent_id,
            Stage=batch.stage,
            CorrelationId=ctx.correlation_id,
            DryRun=ctx.dry_run,
        )
        if not ctx.dry_run:
            SYNC_UNKNOWN_ENUM.labels(enum, value).inc()
    for reference in record.unresolved_references:
        batch.result.unresolved_references.append(reference)
        _log(
            logging.WARNING,
            "unresolved-reference",
            Reference=reference,
            ExternalId=record.talent_id,
            Stage=batch.stage,
            CorrelationId=ctx.correlation_id,
            DryRun=ctx.dry_run,
        )
        if not ctx.dry_run:
            SYNC_UNRESOLVED_REFERENCE.labels(reference).inc()


def _touch(batch: _Batch, spec: _Entity, row: Mapping[str, Any]) -> None:
    """Project, building, layout group, layout and property object changes touch their project."""
    if spec.name == "project":
        batch.touched[str(row["id"])] = str(row["tenant_id"])
    elif spec.name != "developer":
        batch.touched[str(row["project_id"])] = str(row["tenant_id"])


def _event(batch: _Batch, event_type: str, row: Mapping[str, Any], payload: dict[str, Any]) -> _Event:
    return _Event(event_type, str(row["id"]), payload)


def _payload_json(raw: Any) -> str:
    """The raw snapshot as jsonb text; jsonb holds neither \\u0000 nor lone surrogates."""
    text = json.dumps(raw, ensure_ascii=False, default=str)
    if "\\u0000" in text or not text.isascii():
        text = json.dumps(_clean(raw), ensure_ascii=False, default=str)
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, Mapping):
        return {str(k).replace("\x00", "\ufffd"): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _log(level: int, event: str, **fields: Any) -> None:
    if log.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        log.log(level, "%s %s", event, text, extra={"event": event, "fields": fields})


# ---------------------------------------------------------------------------------------------
# Connection plumbing


def _dry_state(ctx: ApplyContext) -> DryRunState:
    if ctx.dry_run_state is None:
        ctx.dry_run_state = DryRunState()
    return ctx.dry_run_state


def _begin(conn: Connection) -> None:
    """The raw psycopg2 cursor shares the caller's transaction; make sure SQLAlchemy knows there is one."""
    if not conn.in_transaction():
        conn.begin()


_UUID_AS_TEXT = new_type((2950,), "PIN_UUID_TEXT", lambda value, cursor: value)


class _Cursor:
    """A psycopg2 cursor on the caller's connection (same transaction). uuid values go in and out
    as canonical strings; driver errors surface as SQLAlchemy's exceptions
    (IntegrityError, OperationalError, ...), so callers catch one family whatever the path."""

    def __init__(self, conn: Connection) -> None:
        driver = conn.connection.driver_connection
        if driver is None:  # a closed or invalidated connection
            raise RuntimeError("the connection has no open database connection")
        self._cur = driver.cursor()
        register_type(_UUID_AS_TEXT, self._cur)  # over the uuid.UUID caster SQLAlchemy registers

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cur.close()

    def execute(self, sql: str, params: Mapping[str, Any]) -> None:
        try:
            self._cur.execute(sql, params)
        except psycopg2.Error as exc:
            raise DBAPIError.instance(sql, None, exc, psycopg2.Error) from exc

    def copy(self, sql: str, data: io.StringIO) -> None:
        try:
            self._cur.copy_expert(sql, data)
        except psycopg2.Error as exc:
            raise DBAPIError.instance(sql, None, exc, psycopg2.Error) from exc

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall()

    @property
    def description(self):
        return self._cur.description


def _cursor(conn: Connection) -> _Cursor:
    return _Cursor(conn)


def array_literal(values: Sequence[Any], text: bool = False) -> str:
    """A PostgreSQL array literal ('{…}') of the values, cast by the query (`%(x)s::uuid[]`).

    One string per column instead of one adapted parameter per value: psycopg2 quotes it once,
    which is several times cheaper than adapting a list element by element (see apply_bench).
    `text`: the values are strings, quoted and escaped; otherwise they are ids (canonical UUID
    strings), integers, decimals or datetimes, whose text needs no quoting."""
    if text:
        items = [
            "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values
        ]
    else:
        items = [
            "NULL" if v is None else f'"{v.isoformat()}"' if isinstance(v, datetime) else str(v)
            for v in values
        ]
    return "{" + ",".join(items) + "}"


def _fetch_rows(cur) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

"""The apply path's decisions, as functions of values (docs/talent-source.md): rounds of repeated ids,
parents, the version guard, status conflicts, live numbers, change events, DryRun rows.

No I/O: replica/apply.py reads the rows these need and writes what they decide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import ARCHIVED, ROLE, Entity, Role
from pin_chessboard_pipelines.errors import SYNC_PARENT_MISMATCH, SYNC_PARENT_NOT_FOUND
from pin_chessboard_pipelines.events import payloads
from pin_chessboard_pipelines.talent.snapshots import TalentRecord
from pin_chessboard_pipelines.talent.topic_reader import Source

TALENT_SYNC = "TalentSync"  # status_source of replicated statuses; source of price/status events
# A PIN-side hold that a Talent `Sold` must not silently override (CHESSBOARD_SYNC_STATUS_CONFLICT).
HELD_STATUSES = frozenset({"Reserved", "Booked"})

Row = Mapping[str, Any]
NumberKey = tuple[str, str]  # (building PIN id, number)


class Decided(Protocol):
    """An item about to be stored: its upsert values and the current row (None = create)."""

    @property
    def talent_id(self) -> str: ...

    values: dict[str, Any]
    old: dict[str, Any] | None


class Recorded(Protocol):
    record: TalentRecord


R = TypeVar("R", bound=Recorded)
D = TypeVar("D", bound=Decided)


def rounds(items: Sequence[R]) -> list[list[R]]:
    """First occurrences of each Talent id, then second ones, ...: applying the rounds in order
    gives what applying the items one by one would."""
    result: list[list[R]] = []
    occurrences: dict[str, int] = {}
    for item in items:
        n = occurrences.get(item.record.talent_id, 0)
        occurrences[item.record.talent_id] = n + 1
        if n == len(result):
            result.append([])
        result[n].append(item)
    return result


def check_parents(
    entity: Entity,
    values: dict[str, Any],
    record: TalentRecord,
    parents: Mapping[str, Row],
    extra_parents: Mapping[str, Row],
) -> tuple[str, str] | None:
    """Fills the columns the parent rows give (tenant, project of an object) into `values`;
    (error code, message) when the item must be quarantined instead."""
    if entity.parent is None or entity.parent_column is None:
        return None
    parent = parents.get(values[entity.parent_column])
    if parent is None:
        return SYNC_PARENT_NOT_FOUND, (
            f"{entity.name}: {entity.parent} {record.parents[entity.parent]} is not in the replica"
        )
    if entity.name == "propertyObject":
        values["project_id"] = parent["project_id"]
    values["tenant_id"] = parent["tenant_id"]
    extra_name, extra_column = entity.extra_parent, entity.extra_parent_column
    if extra_name is None or extra_column is None or extra_name not in record.parents:
        return None
    extra = extra_parents.get(values[extra_column])
    talent_extra = record.parents[extra_name]
    if extra is None:
        return SYNC_PARENT_NOT_FOUND, f"{entity.name}: {extra_name} {talent_extra} is not in the replica"
    if extra["project_id"] != values["project_id"]:
        return SYNC_PARENT_MISMATCH, f"{entity.name}: {extra_name} {talent_extra} belongs to another project"
    return None


def with_developer_tenants(parent: str, rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A developer is its own tenant (tenant boundary = developer)."""
    if parent == "developer":
        for row in rows.values():
            row["tenant_id"] = row["id"]
    return rows


def is_stale(old: Row | None, replica_version: int) -> bool:
    """The version guard: a snapshot no newer than the stored row is skipped."""
    return old is not None and old["replica_version"] >= replica_version


def superseded_by_delete(source: Source | None, tombstone: tuple[int | None, int | None] | None) -> bool:
    """Whether a later delete makes a snapshot stale (docs/talent-source.md#deletes). A tombstone
    carries no version, so its position in the topic is its version: a snapshot read from the same
    partition before it (a dead letter replayed, a late replay) or read from no topic (ApiPull,
    which cannot say when it read) is older; one read after it re-creates the entity. A delete of
    no known position, or one of another partition (the topic was repartitioned), leaves the
    decision to the version guard."""
    if tombstone is None:
        return False
    partition, offset = tombstone
    if partition is None or offset is None:
        return False
    if source is None:
        return True
    return source.partition == partition and source.offset < offset


def owner_changed(entity: str, values: Row, old: Row | None) -> str | None:
    """A project's tenant / developer are fixed at create (docs/store.md#replica-tables): a snapshot
    naming another developer is quarantined (the message), never applied."""
    if entity != "project" or old is None or old.get("developer_id") is None:
        return None
    if str(values["developer_id"]) == str(old["developer_id"]):
        return None
    return (
        f"project developerId: the snapshot says {values['developer_id']}, the project belongs to "
        f"{old['developer_id']} (tenant and developer are immutable)"
    )


def status_conflict(entity: str, values: Row, old: Row | None) -> str | None:
    """Talent's `Sold` over a PIN hold is a conflict (the message), never an overwrite."""
    if (
        entity == "propertyObject"
        and old is not None
        and values["status"] == "Sold"
        and old["status"] in HELD_STATUSES
        and old["status_source"] != TALENT_SYNC
    ):
        return (
            f"propertyObject status: Talent says Sold, PIN holds it {old['status']} "
            f"(status source {old['status_source']})"
        )
    return None


def wanted_numbers(decided: Sequence[Decided]) -> set[NumberKey]:
    return {(i.values["building_id"], i.values["number"]) for i in decided if i.values["deleted_at"] is None}


def claim_live_numbers(
    decided: Sequence[D], taken: dict[NumberKey, str | None]
) -> tuple[list[D], list[tuple[D, str]]]:
    """A number is unique among the live objects of a building: the one applied first keeps it, in
    batch order and against `taken` (holders now; updated in place). (kept, [(item, message)])."""
    kept: list[D] = []
    rejected: list[tuple[D, str]] = []
    for item in decided:
        values, old, own = item.values, item.old, item.talent_id
        key = (values["building_id"], values["number"])
        live = values["deleted_at"] is None
        holder = taken.get(key)
        if live and holder is not None and holder != own:
            rejected.append(
                (
                    item,
                    f"propertyObject number {values['number']!r} is already taken by live object "
                    f"{holder} in building {values['building_id']}",
                )
            )
            continue
        if old is not None and old["deleted_at"] is None:
            old_key = (old["building_id"], old["number"])
            if old_key != key or not live:
                taken[old_key] = None
        if live:
            taken[key] = own
        kept.append(item)
    return kept, rejected


def object_change_events(row: Row, old: Row | None) -> list[tuple[str, dict[str, Any]]]:
    """price-changed when the price changed (on create: the initial price point, if any);
    status-changed when the status changed (on create: only an imported Sold)."""
    events = []
    old_price = None if old is None else old["price"]
    if (row["price"] is not None) if old is None else (old_price != row["price"]):
        payload = payloads.property_object_price_changed(row, old_price, TALENT_SYNC)
        events.append((payloads.PROPERTY_OBJECT_PRICE_CHANGED, payload))
    old_status = None if old is None else old["status"]
    if (row["status"] == "Sold") if old is None else (old_status != row["status"]):
        payload = payloads.property_object_status_changed(row, old_status, TALENT_SYNC)
        events.append((payloads.PROPERTY_OBJECT_STATUS_CHANGED, payload))
    return events


def touched_project(entity: str, row: Row) -> tuple[str, str] | None:
    """(project PIN id, tenant id) a change recalculates; developers touch none."""
    if entity == "project":
        return str(row["id"]), str(row["tenant_id"])
    if entity != "developer":
        return str(row["project_id"]), str(row["tenant_id"])
    return None


def touched_projects(entity: str, row: Row, old: Row | None) -> list[tuple[str, str]]:
    """Every (project PIN id, tenant id) a change recalculates: the row's project and, when the
    change moves the row to another project, the old one too (docs/store.md#replica-tables)."""
    new = touched_project(entity, row)
    if new is None:
        return []
    touched = [new]
    if old is not None and entity != "project" and old.get("project_id") is not None:
        before = (str(old["project_id"]), str(old.get("tenant_id") or row["tenant_id"]))
        if before[0] != new[0]:
            touched.append(before)
    return touched


def linked_parent_ids(entity: Entity, values: Row, old: Row | None) -> set[str]:
    """The optional parents (layout of an object, layout group of a layout) whose counters a change
    moves: the old one and the new one. They may sit in another project than the row (a moved
    layout, group or building), so their projects are recalculated too (docs/store.md#moves)."""
    column = entity.extra_parent_column
    if column is None:
        return set()
    ids = {values.get(column), None if old is None else old.get(column)}
    return {str(i) for i in ids if i is not None}


def moved_building(row: Row, old: Row | None) -> tuple[str, str, str] | None:
    """(building, new project, new tenant) when a building change moves it to another project: its
    property objects follow (docs/store.md#moves)."""
    if old is None:
        return None
    if (str(old["project_id"]), str(old["tenant_id"])) == (str(row["project_id"]), str(row["tenant_id"])):
        return None
    return str(row["id"]), str(row["project_id"]), str(row["tenant_id"])


def dry_run_row(entity: str, values: Row, old: Row | None) -> dict[str, Any]:
    """What the upsert would store: the snapshot's values over the current row, version + 1, its
    stamps (an object's status_source) and its archive flag (a deleted project's status) as the
    roles of its columns say (entities.py)."""
    stored = {**(old or {}), **values, "version": 1 if old is None else old["version"] + 1}
    for column in entities.entity(entity).columns:
        role = column.info[ROLE]
        if role is Role.STAMP and column.server_default is not None:
            stored[column.name] = getattr(column.server_default, "arg", None)
        elif role is Role.ARCHIVE and stored.get("deleted_at") is not None:
            stored[column.name] = ARCHIVED
    return stored


def released_number(entity: str, stored: Row, old: Row | None) -> tuple[NumberKey, str] | None:
    """(number key, holder) a delete frees: a live object that the change soft-deletes."""
    if entity != "propertyObject" or old is None or old["deleted_at"] is not None:
        return None
    if stored["deleted_at"] is None:
        return None
    return (old["building_id"], old["number"]), old["external_talent_id"]

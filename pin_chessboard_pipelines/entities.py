"""The six Talent entities, once: every name the source, the store, Dagster and the events give them,
and the columns of its replica table with the role of each.

Facts only (docs/talent-source.md, docs/store.md); behaviour keyed by entity lives with its layer.
`ENTITIES` runs parent -> child: the import walks its stages and TopicReplay its topics in this order.
From an entity's declaration come its table (store/tables.py adds the columns every replica row
has), its upsert and version guard (store/replica_upserts.py) and the replica's column lists
(replica/columns.py).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger, Column, ForeignKey, Integer, Numeric, SmallInteger, String
from sqlalchemy.dialects.postgresql import UUID

SCHEMA = "chessboard"
ROLE = "role"  # the key of a column's role in its `info`
ARCHIVED = "Archived"  # the value of an ARCHIVE column once its row was deleted (docs/store.md)


class Role(StrEnum):
    """What the replica's upsert does with a column (docs/store.md#replica-tables)."""

    ID = "id"  # the PIN id: written on create
    TALENT_ID = "talent_id"  # the Talent id: the upsert's conflict target
    REPLICA_VERSION = "replica_version"  # the snapshot's version: the version guard
    SNAPSHOT = "snapshot"  # from the snapshot, on create and on every newer one; a change is published
    CREATE_ONLY = "create_only"  # from the snapshot, on create only
    OWNER = "owner"  # on create only; a snapshot naming another owner changes nothing (version guard)
    STAMP = "stamp"  # its default on create and on every newer snapshot; a change is published
    ARCHIVE = "archive"  # its default on create; Archived with a deleted snapshot, then for good
    SOURCE = "source"  # sync bookkeeping: its default on create and on every newer snapshot
    SYNCED_AT = "synced_at"  # sync bookkeeping: now() on every applied snapshot
    VERSION = "version"  # 1 on create, +1 on every published change
    CREATED_AT = "created_at"  # sync bookkeeping: its default on create, never written again
    UPDATED_AT = "updated_at"  # sync bookkeeping: now() on every published change
    PIN = "pin"  # PIN's own (statuses, aggregates, ...): its default on create, never written by a sync


def column(name: str, type_: Any, role: Role, *args: Any, nullable: bool = True, **kw: Any) -> Column:
    """A column of a replica table and its role."""
    return Column(name, type_, *args, nullable=nullable, info={ROLE: role}, **kw)


def parent_key(name: str, table: str, role: Role = Role.SNAPSHOT, nullable: bool = False) -> Column:
    """The PIN id of a parent row (chessboard.{table})."""
    return column(
        name, UUID(as_uuid=True), role, ForeignKey(f"{SCHEMA}.{table}.id"), nullable=nullable, index=True
    )


def tenant(role: Role = Role.SNAPSHOT) -> Column:
    """The tenant: the developer's PIN id."""
    return column("tenant_id", UUID(as_uuid=True), role, nullable=False)


def name_column() -> Column:
    return column("name", String(256), Role.SNAPSHOT, nullable=False)


def pin_counter(name: str) -> Column:
    """An aggregate the recalc keeps (docs/project-aggregates-recalc.md)."""
    return column(name, Integer, Role.PIN, nullable=False, server_default="0")


def in_project(*columns: Column) -> tuple[Column, ...]:
    """The columns of a row under a project: its tenant and project, then `columns`."""
    return tenant(), parent_key("project_id", "projects"), *columns


def draft_status(role: Role = Role.PIN) -> Column:
    return column("status", String(32), role, nullable=False, server_default="Draft")


# PIN ids are deterministic functions of Talent ids (docs/store.md#replica-tables), so a
# bootstrap and a streaming sync of the same data produce bit-identical rows.
PIN_NAMESPACE = uuid.UUID("6f1c8a52-1c0e-5c3e-9d1a-7f0b2c4d6e8a")


@dataclass(frozen=True)
class Entity:
    name: str  # snapshot kind (docs/talent-source.md#snapshots): developer .. propertyObject
    stage: str  # TalentImportStage: Developers .. PropertyObjects
    collection: str  # Talent HTTP collection: /api/v1/{collection}
    topic: str  # compacted Talent topic, key = Talent id
    partitions: int  # partitions of the Talent topic (the simulator creates it so)
    table: str  # chessboard.{table}
    asset: str  # Dagster asset key of the import stage
    aggregate_type: str  # aggregateType of its events, label of the import metrics
    upserted_event: str  # eventType of its upserted event
    event_partitions: int  # partitions of the pin.chessboard topics of its events
    parent: str | None  # required parent entity
    parent_column: str | None  # column of `table` holding the parent's PIN id
    scope_field: str | None  # snapshot field holding the parent's Talent id (scope filters)
    extra_parent: str | None = None  # optional parent (layout group of a layout, layout of an object)
    extra_parent_column: str | None = None
    # the columns of its table besides the ones every replica row has (store/tables.py), each with
    # its Role; declared once, attached to the table once
    columns: tuple[Column, ...] = field(default=(), compare=False, repr=False)


def declare(
    name: str,
    stage: str,
    collection: str,
    aggregate_type: str,
    parent: str | None,
    parent_column: str | None,
    scope_field: str | None,
    extra_parent: str | None = None,
    extra_parent_column: str | None = None,
    partitions: int = 3,
    columns: tuple[Column, ...] = (),
) -> Entity:
    """An entity and the names derived from its collection."""
    table = collection.replace("-", "_")
    return Entity(
        name=name,
        stage=stage,
        collection=collection,
        topic=f"talent.chessboard.{collection}.v1",
        partitions=partitions,
        table=table,
        asset=table,
        aggregate_type=aggregate_type,
        upserted_event=f"pin.chessboard.{collection[:-1]}-upserted",
        event_partitions=partitions,
        parent=parent,
        parent_column=parent_column,
        scope_field=scope_field,
        extra_parent=extra_parent,
        extra_parent_column=extra_parent_column,
        columns=columns,
    )


def talent_entity(
    name: str,
    parent: str | None = None,
    extra_parent: str | None = None,
    partitions: int = 3,
    columns: tuple[Column, ...] = (),
) -> Entity:
    """`declare` with the names that follow from `name` and the parents' names by Talent's
    conventions: the aggregate type (LayoutGroup), the stage (LayoutGroups), the collection
    (layout-groups), a parent's column (layout_group_id) and the scope field (layoutGroupId)."""
    aggregate_type = name[0].upper() + name[1:]
    return declare(
        name,
        f"{aggregate_type}s",
        _kebab(name) + "s",
        aggregate_type,
        parent,
        None if parent is None else _parent_column(parent),
        None if parent is None else f"{parent}Id",
        extra_parent,
        None if extra_parent is None else _parent_column(extra_parent),
        partitions,
        columns,
    )


def _kebab(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "-" + m.group().lower(), name)


def _parent_column(parent: str) -> str:
    return _kebab(parent).replace("-", "_") + "_id"


DEVELOPER = talent_entity(
    "developer",
    columns=(name_column(), column("inn", String(12), Role.SNAPSHOT), draft_status()),
)
PROJECT = talent_entity(
    "project",
    parent="developer",
    columns=(
        # a project's tenant and developer never change (CHESSBOARD_SYNC_IMMUTABLE_CHANGED)
        tenant(Role.CREATE_ONLY),
        parent_key("developer_id", "developers", Role.OWNER),
        draft_status(Role.ARCHIVE),  # a snapshot with deletedAt archives the project (docs/store.md)
        name_column(),
        column("type", String(32), Role.SNAPSHOT, nullable=False),
        column("class", String(32), Role.SNAPSHOT, nullable=False),
        column("construction_status", String(32), Role.SNAPSHOT, nullable=False),
        column("country_id", SmallInteger, Role.SNAPSHOT, nullable=False),
        column("region_id", BigInteger, Role.SNAPSHOT),
        column("city_id", BigInteger, Role.SNAPSHOT),
        column("stars", SmallInteger, Role.SNAPSHOT),
        column("hotelier_id", UUID(as_uuid=True), Role.PIN),
        column("currency_id", SmallInteger, Role.SNAPSHOT, nullable=False),
        column("payback_years", Numeric, Role.SNAPSHOT),
        column("cover_image_file_id", UUID(as_uuid=True), Role.PIN),
        column("price_min", Numeric, Role.PIN),
        column("price_max", Numeric, Role.PIN),
        pin_counter("property_objects_total_count"),
        pin_counter("property_objects_free_count"),
    ),
)
BUILDING = talent_entity(
    "building",
    parent="project",
    columns=in_project(
        draft_status(),
        name_column(),
        column("floors_count", SmallInteger, Role.SNAPSHOT, nullable=False),
        pin_counter("property_objects_total_count"),
        pin_counter("property_objects_free_count"),
    ),
)
LAYOUT_GROUP = talent_entity(
    "layoutGroup",
    parent="project",
    columns=in_project(
        name_column(),
        column("rooms", SmallInteger, Role.SNAPSHOT, nullable=False),
        pin_counter("layouts_count"),
        column("area_min", Numeric, Role.PIN),
        column("area_max", Numeric, Role.PIN),
    ),
)
LAYOUT = talent_entity(
    "layout",
    parent="project",
    extra_parent="layoutGroup",
    columns=in_project(
        parent_key("layout_group_id", "layout_groups", nullable=True),
        name_column(),
        column("rooms", SmallInteger, Role.SNAPSHOT, nullable=False),
        column("total_area", Numeric, Role.SNAPSHOT, nullable=False),
        pin_counter("property_objects_count"),
    ),
)
PROPERTY_OBJECT = talent_entity(
    "propertyObject",
    parent="building",
    extra_parent="layout",
    partitions=6,
    columns=in_project(
        parent_key("building_id", "buildings"),
        parent_key("layout_id", "layouts", nullable=True),
        column("number", String(32), Role.SNAPSHOT, nullable=False),
        column("floor", SmallInteger, Role.SNAPSHOT, nullable=False),
        column("section", SmallInteger, Role.SNAPSHOT),
        column("status", String(32), Role.SNAPSHOT, nullable=False),
        # Talent's status is TalentSync's, on create and on update
        column("status_source", String(32), Role.STAMP, nullable=False, server_default="TalentSync"),
        column("price", Numeric, Role.SNAPSHOT),
        column("total_area", Numeric, Role.SNAPSHOT),
    ),
)

ENTITIES: tuple[Entity, ...] = (DEVELOPER, PROJECT, BUILDING, LAYOUT_GROUP, LAYOUT, PROPERTY_OBJECT)
NAMES: tuple[str, ...] = tuple(e.name for e in ENTITIES)
STAGE_NAMES: tuple[str, ...] = tuple(e.stage for e in ENTITIES)
COLLECTIONS: tuple[str, ...] = tuple(e.collection for e in ENTITIES)
TOPICS: tuple[str, ...] = tuple(e.topic for e in ENTITIES)

BY_NAME: dict[str, Entity] = {e.name: e for e in ENTITIES}
BY_STAGE: dict[str, Entity] = {e.stage: e for e in ENTITIES}
BY_COLLECTION: dict[str, Entity] = {e.collection: e for e in ENTITIES}
BY_TOPIC: dict[str, Entity] = {e.topic: e for e in ENTITIES}
BY_TABLE: dict[str, Entity] = {e.table: e for e in ENTITIES}
BY_UPSERTED_EVENT: dict[str, Entity] = {e.upserted_event: e for e in ENTITIES}


def entity(name: str) -> Entity:
    """The entity of a snapshot kind (docs/talent-source.md#snapshots); ValueError naming the six
    for any other."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown Talent entity {name!r}: expected one of {', '.join(NAMES)}") from None


def pin_id(entity: str, talent_id: uuid.UUID | str) -> uuid.UUID:
    """The PIN id of a Talent id; `entity` is the snapshot kind (developer .. propertyObject)."""
    return uuid.uuid5(PIN_NAMESPACE, f"{entity}:{str(talent_id).lower()}")

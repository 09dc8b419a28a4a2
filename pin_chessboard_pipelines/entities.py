"""The six Talent entities, once: every name the source, the store, Dagster and the events give them.

Facts only (docs/talent-source.md, docs/store.md); behaviour keyed by entity lives with its layer.
`ENTITIES` runs parent -> child: the import walks its stages and TopicReplay its topics in this order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

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


def _entity(
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
) -> Entity:
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
    )


DEVELOPER = _entity("developer", "Developers", "developers", "Developer", None, None, None)
PROJECT = _entity("project", "Projects", "projects", "Project", "developer", "developer_id", "developerId")
BUILDING = _entity("building", "Buildings", "buildings", "Building", "project", "project_id", "projectId")
LAYOUT_GROUP = _entity(
    "layoutGroup", "LayoutGroups", "layout-groups", "LayoutGroup", "project", "project_id", "projectId"
)
LAYOUT = _entity(
    "layout",
    "Layouts",
    "layouts",
    "Layout",
    "project",
    "project_id",
    "projectId",
    "layoutGroup",
    "layout_group_id",
)
PROPERTY_OBJECT = _entity(
    "propertyObject",
    "PropertyObjects",
    "property-objects",
    "PropertyObject",
    "building",
    "building_id",
    "buildingId",
    "layout",
    "layout_id",
    partitions=6,
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

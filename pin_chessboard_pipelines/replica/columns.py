"""The replica side of each entity: the columns its upsert takes and the columns its reads need.

Mirrors the upsert_<table> statements of store/sql/replica.sql; the names come from entities.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import Entity


@dataclass(frozen=True)
class ReplicaEntity:
    entity: Entity
    upsert_columns: tuple[str, ...]  # array parameters of upsert_<table>, in replica.sql order
    existing_columns: tuple[str, ...] = ("project_id", "tenant_id")  # read besides EXISTING

    @property
    def name(self) -> str:
        return self.entity.name


COMMON = ("id", "external_talent_id", "replica_version", "deleted_at")
EXISTING = ("id", "external_talent_id", "replica_version", "version", "deleted_at")
# Upsert columns whose values are free text (quoted in array literals); the others are ids,
# numbers and timestamps.
TEXT_COLUMNS = frozenset({"name", "inn", "type", "class", "construction_status", "number", "status"})

REPLICA: dict[str, ReplicaEntity] = {
    r.name: r
    for r in (
        ReplicaEntity(entities.DEVELOPER, (*COMMON, "name", "inn"), ()),
        ReplicaEntity(
            entities.PROJECT,
            (
                *COMMON,
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
            ("tenant_id", "developer_id"),
        ),
        ReplicaEntity(entities.BUILDING, (*COMMON, "tenant_id", "project_id", "name", "floors_count")),
        ReplicaEntity(entities.LAYOUT_GROUP, (*COMMON, "tenant_id", "project_id", "name", "rooms")),
        ReplicaEntity(
            entities.LAYOUT,
            (*COMMON, "tenant_id", "project_id", "layout_group_id", "name", "rooms", "total_area"),
            ("project_id", "tenant_id", "layout_group_id"),
        ),
        ReplicaEntity(
            entities.PROPERTY_OBJECT,
            (
                *COMMON,
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
            (
                "project_id",
                "tenant_id",
                "building_id",
                "layout_id",
                "number",
                "status",
                "status_source",
                "price",
            ),
        ),
    )
}


def replica_entity(name: str) -> ReplicaEntity:
    """The replica side of a Talent entity (docs/talent-source.md#snapshots); ValueError naming
    the six for any other."""
    return REPLICA[entities.entity(name).name]

"""The aggregate formulas (docs/project-aggregates-recalc.md#aggregates) as pure functions of row values.

The recalc itself runs them set-based in SQL (store/sql/recalc.sql, `recalc_batch`); these are
the reference the audit and the property tests compare the store with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any
from uuid import UUID

FREE = "Free"
HIDDEN = "Hidden"
ARCHIVED = "Archived"


def is_free(obj: Mapping[str, Any]) -> bool:
    """free object = deleted_at is null and status = 'Free'."""
    return obj["deleted_at"] is None and obj["status"] == FREE


def is_active(obj: Mapping[str, Any]) -> bool:
    """active object = deleted_at is null and status <> 'Hidden'."""
    return obj["deleted_at"] is None and obj["status"] != HIDDEN


def is_live(row: Mapping[str, Any]) -> bool:
    """live layout = deleted_at is null."""
    return row["deleted_at"] is None


def carries_aggregates(project: Mapping[str, Any]) -> bool:
    """An archived or deleted project carries no aggregates: recalc and audit leave it alone."""
    return project["deleted_at"] is None and project["status"] != ARCHIVED


def _min(values: list[Decimal]) -> Decimal | None:
    return min(values) if values else None


def _max(values: list[Decimal]) -> Decimal | None:
    return max(values) if values else None


@dataclass(frozen=True)
class ProjectAggregates:
    price_min: Decimal | None
    price_max: Decimal | None
    property_objects_total_count: int
    property_objects_free_count: int


@dataclass(frozen=True)
class BuildingAggregates:
    property_objects_total_count: int
    property_objects_free_count: int


@dataclass(frozen=True)
class LayoutAggregates:
    property_objects_count: int


@dataclass(frozen=True)
class LayoutGroupAggregates:
    layouts_count: int
    area_min: Decimal | None
    area_max: Decimal | None


def project_aggregates(objects: Iterable[Mapping[str, Any]]) -> ProjectAggregates:
    """Over the project's property objects: price bounds and count of free ones, count of active ones.

    A free object without a price counts as free but gives no price bound (min/max skip NULL).
    """
    objects = list(objects)
    prices = [o["price"] for o in objects if is_free(o) and o["price"] is not None]
    return ProjectAggregates(
        price_min=_min(prices),
        price_max=_max(prices),
        property_objects_total_count=sum(1 for o in objects if is_active(o)),
        property_objects_free_count=sum(1 for o in objects if is_free(o)),
    )


def building_aggregates(objects: Iterable[Mapping[str, Any]]) -> BuildingAggregates:
    """Over one building's property objects."""
    objects = list(objects)
    return BuildingAggregates(
        property_objects_total_count=sum(1 for o in objects if is_active(o)),
        property_objects_free_count=sum(1 for o in objects if is_free(o)),
    )


def layout_aggregates(objects: Iterable[Mapping[str, Any]]) -> LayoutAggregates:
    """Over one layout's property objects."""
    return LayoutAggregates(property_objects_count=sum(1 for o in objects if is_active(o)))


def layout_group_aggregates(layouts: Iterable[Mapping[str, Any]]) -> LayoutGroupAggregates:
    """Over one layout group's layouts."""
    areas = [layout["total_area"] for layout in layouts if is_live(layout)]
    return LayoutGroupAggregates(layouts_count=len(areas), area_min=_min(areas), area_max=_max(areas))


@dataclass(frozen=True)
class ExpectedAggregates:
    """Every aggregate of one project's hierarchy, by row id."""

    project: ProjectAggregates
    buildings: dict[UUID, BuildingAggregates]
    layouts: dict[UUID, LayoutAggregates]
    layout_groups: dict[UUID, LayoutGroupAggregates]


def expected_aggregates(
    building_ids: Iterable[UUID],
    layout_group_ids: Iterable[UUID],
    layouts: Iterable[Mapping[str, Any]],
    objects: Iterable[Mapping[str, Any]],
) -> ExpectedAggregates:
    """The whole hierarchy of one project from its rows (`layouts`: id, layout_group_id,
    total_area, deleted_at; `objects`: building_id, layout_id, status, price, deleted_at)."""
    layouts = list(layouts)
    objects = list(objects)
    return ExpectedAggregates(
        project=project_aggregates(objects),
        buildings={b: building_aggregates(o for o in objects if o["building_id"] == b) for b in building_ids},
        layouts={
            layout["id"]: layout_aggregates(o for o in objects if o["layout_id"] == layout["id"])
            for layout in layouts
        },
        layout_groups={
            g: layout_group_aggregates(layout for layout in layouts if layout["layout_group_id"] == g)
            for g in layout_group_ids
        },
    )


def changed_fields(stored: Mapping[str, Any], expected: object) -> list[str]:
    """Fields whose stored value differs from the formula (numerically: 100.0 equals 100.00)."""
    return [name for name, value in vars(expected).items() if not _same(stored[name], value)]


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return Decimal(str(a)) == Decimal(str(b))

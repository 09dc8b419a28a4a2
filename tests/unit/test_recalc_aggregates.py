"""The aggregate formulas (docs/project-aggregates-recalc.md#aggregates) as pure functions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

from tests.support.aggregates import (
    BuildingAggregates,
    LayoutGroupAggregates,
    ProjectAggregates,
    building_aggregates,
    carries_aggregates,
    changed_fields,
    expected_aggregates,
    layout_aggregates,
    layout_group_aggregates,
    project_aggregates,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def obj(status: str, price: str | None = None, deleted: bool = False, building=None, layout=None) -> dict:
    return {
        "status": status,
        "price": None if price is None else Decimal(price),
        "deleted_at": NOW if deleted else None,
        "building_id": building,
        "layout_id": layout,
    }


def test_empty_set_gives_null_bounds_and_zero_counters():
    assert project_aggregates([]) == ProjectAggregates(None, None, 0, 0)
    assert building_aggregates([]) == BuildingAggregates(0, 0)
    assert layout_aggregates([]).property_objects_count == 0
    assert layout_group_aggregates([]) == LayoutGroupAggregates(0, None, None)


def test_price_bounds_come_from_free_objects_only():
    objects = [
        obj("Free", "300"),
        obj("Free", "100.50"),
        obj("Sold", "1"),
        obj("Reserved", "99999"),
        obj("Free", "5", deleted=True),
        obj("Free", None),
    ]
    assert project_aggregates(objects) == ProjectAggregates(Decimal("100.50"), Decimal("300"), 5, 3)


def test_hidden_and_deleted_objects_are_not_active():
    objects = [obj("Hidden", "1"), obj("Booked"), obj("Sold", deleted=True), obj("Free")]
    assert project_aggregates(objects).property_objects_total_count == 2
    assert layout_aggregates(objects).property_objects_count == 2


def test_no_free_objects_gives_null_price_and_zero_free():
    result = project_aggregates([obj("Sold", "10"), obj("Booked", "20")])
    assert (result.price_min, result.price_max, result.property_objects_free_count) == (None, None, 0)
    assert result.property_objects_total_count == 2


def test_layout_group_counts_live_layouts_and_their_areas():
    layouts = [
        {"total_area": Decimal("35.5"), "deleted_at": None},
        {"total_area": Decimal("80"), "deleted_at": None},
        {"total_area": Decimal("10"), "deleted_at": NOW},
    ]
    assert layout_group_aggregates(layouts) == LayoutGroupAggregates(2, Decimal("35.5"), Decimal("80"))


def test_archived_or_deleted_projects_carry_no_aggregates():
    assert carries_aggregates({"status": "Published", "deleted_at": None})
    assert carries_aggregates({"status": "Draft", "deleted_at": None})
    assert not carries_aggregates({"status": "Archived", "deleted_at": None})
    assert not carries_aggregates({"status": "Published", "deleted_at": NOW})


def test_expected_aggregates_of_a_hierarchy():
    b1, b2, g1, l1, l2 = (uuid.uuid4() for _ in range(5))
    layouts = [
        {"id": l1, "layout_group_id": g1, "total_area": Decimal("40"), "deleted_at": None},
        {"id": l2, "layout_group_id": None, "total_area": Decimal("50"), "deleted_at": None},
    ]
    objects = [obj("Free", "10", building=b1, layout=l1), obj("Sold", "20", building=b1, layout=l2)]
    expected = expected_aggregates([b1, b2], [g1], layouts, objects)
    assert expected.project == ProjectAggregates(Decimal("10"), Decimal("10"), 2, 1)
    assert expected.buildings == {b1: BuildingAggregates(2, 1), b2: BuildingAggregates(0, 0)}
    assert {k: v.property_objects_count for k, v in expected.layouts.items()} == {l1: 1, l2: 1}
    assert expected.layout_groups == {g1: LayoutGroupAggregates(1, Decimal("40"), Decimal("40"))}


def test_changed_fields_compare_numerically():
    stored = {
        "price_min": Decimal("100.0"),
        "price_max": None,
        "property_objects_total_count": 3,
        "property_objects_free_count": 1,
    }
    same = ProjectAggregates(Decimal("100.00"), None, 3, 1)
    assert changed_fields(stored, same) == []
    other = ProjectAggregates(Decimal("100"), Decimal("5"), 4, 1)
    assert changed_fields(stored, other) == ["price_max", "property_objects_total_count"]

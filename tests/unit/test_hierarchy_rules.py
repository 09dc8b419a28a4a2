"""Moves and per-developer figures as functions of values: linked parents, moved buildings, the
DryRun's digest of published columns, orphans listed under a developer."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from uuid import UUID

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.replica import changes, rules
from pin_chessboard_pipelines.replica.context import ApplyResult

L1, L2 = "00000000-0000-0000-0000-0000000000a1", "00000000-0000-0000-0000-0000000000a2"


def test_an_objects_old_and_new_layouts_are_linked():
    entity = entities.PROPERTY_OBJECT
    assert rules.linked_parent_ids(entity, {"layout_id": L2}, {"layout_id": L1}) == {L1, L2}
    assert rules.linked_parent_ids(entity, {"layout_id": None}, None) == set()
    assert rules.linked_parent_ids(entities.LAYOUT, {"layout_group_id": L1}, {"layout_group_id": None}) == {
        L1
    }
    assert rules.linked_parent_ids(entities.BUILDING, {"project_id": L1}, None) == set()


def test_a_building_moves_when_its_project_or_tenant_changes():
    old = {"id": "b", "project_id": "p1", "tenant_id": "t1"}
    assert rules.moved_building({**old, "name": "new"}, old) is None
    assert rules.moved_building({**old, "project_id": "p2"}, old) == ("b", "p2", "t1")
    assert rules.moved_building({**old, "project_id": "p3", "tenant_id": "t2"}, old) == ("b", "p3", "t2")
    assert rules.moved_building(old, None) is None  # a create carries nothing


def test_the_digest_finds_equal_what_the_store_finds_equal():
    columns = changes.published_columns(
        "propertyObject", ("id", "replica_version", "price", "building_id", "deleted_at")
    )
    assert columns == ("price", "building_id", "deleted_at", "status_source")
    when = datetime(2026, 11, 1, 10, tzinfo=UTC)
    stored = {"price": Decimal("5.50"), "building_id": L1, "deleted_at": when, "status_source": "TalentSync"}
    mapped = {
        "price": Decimal("5.5"),
        "building_id": UUID(L1),
        "deleted_at": when,
        "status_source": "TalentSync",
    }
    assert changes.digest(stored, columns) == changes.digest(mapped, columns)
    assert changes.digest(stored, columns) != changes.digest({**mapped, "price": Decimal("5.51")}, columns)
    assert changes.digest(stored, columns) != changes.digest({**mapped, "status_source": "Crud"}, columns)


def test_orphans_count_under_the_developer_of_the_listing():
    result = ApplyResult()
    result.count("d1", 0)
    result.count(None, 2)
    result.count(None, 2)
    assert result.listed_under("d1") == {"d1": [1, 0, 2]}
    assert result.listed_under("d2") == {"d1": [1, 0, 0], "d2": [0, 0, 2]}
    assert result.listed_under(None) == {"d1": [1, 0, 0], "": [0, 0, 2]}

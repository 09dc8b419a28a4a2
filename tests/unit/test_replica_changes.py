"""Mapped fields equal -> no event, no version bump (pure comparison)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from uuid import UUID

from tests.support.replica_changes import (
    changed_columns,
    mapped_columns,
    publishes_change,
    same_value,
)

UPSERT = (
    "id",
    "external_talent_id",
    "replica_version",
    "deleted_at",
    "name",
    "price",
    "building_id",
    "status",
)
BUILDING = "0b6c2a55-6a39-5a8e-9f0e-1d3c5b7a9e11"
STORED = {
    "id": "1d0e2f3a-0000-5000-8000-000000000001",
    "external_talent_id": "2d0e2f3a-0000-4000-8000-000000000001",
    "replica_version": 3,
    "deleted_at": None,
    "name": "12",
    "price": Decimal("5000000.50"),
    "building_id": UUID(BUILDING),
    "status": "Free",
}


def test_bookkeeping_columns_are_not_mapped():
    assert mapped_columns(UPSERT) == ("deleted_at", "name", "price", "building_id", "status")


def test_a_newer_version_with_the_same_mapped_fields_publishes_nothing():
    newer = {**STORED, "replica_version": 4, "price": Decimal("5000000.5"), "building_id": BUILDING.upper()}
    assert changed_columns(STORED, newer, mapped_columns(UPSERT)) == []
    assert not publishes_change(STORED, newer, mapped_columns(UPSERT))


def test_any_mapped_change_is_published():
    columns = mapped_columns(UPSERT)
    assert changed_columns(STORED, {**STORED, "price": Decimal("5000000.51")}, columns) == ["price"]
    assert changed_columns(STORED, {**STORED, "price": None}, columns) == ["price"]
    assert changed_columns(STORED, {**STORED, "status": "Sold"}, columns) == ["status"]
    moved = "0b6c2a55-6a39-5a8e-9f0e-1d3c5b7a9e12"
    assert changed_columns(STORED, {**STORED, "building_id": moved}, columns) == ["building_id"]
    deleted = {**STORED, "deleted_at": datetime(2026, 1, 1, tzinfo=UTC)}
    assert changed_columns(STORED, deleted, columns) == ["deleted_at"]
    assert publishes_change(None, STORED, columns)  # a create


def test_values_compare_as_the_store_compares_them():
    assert same_value(Decimal("10"), 10)
    assert same_value(Decimal("0.10"), Decimal("0.1"))
    assert not same_value(Decimal("0.1"), None)
    assert same_value(None, None)
    moment = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert same_value(moment, moment.astimezone(timezone(timedelta(hours=3))))
    assert same_value(moment, "2026-03-01T12:00:00Z")
    assert not same_value("Free", "free")
    assert not same_value(True, 1)

"""How the drain turns changed rows into outbox events (no database)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from decimal import Decimal

from pin_chessboard_pipelines.events.payloads import (
    LAYOUT_GROUP_UPSERTED,
    PROJECT_UPSERTED,
    Handbook,
)
from pin_chessboard_pipelines.recalc.drain import DrainResult
from pin_chessboard_pipelines.recalc.project import event_of, parse_row


def test_parse_row_keeps_decimals_and_timestamps():
    text = json.dumps(
        {
            "id": str(uuid.uuid4()),
            "price_min": 1,
            "area_min": 12.50,
            "updated_at": "2026-11-30T12:22:34.5+00:00",
            "deleted_at": None,
        }
    ).replace("12.5", "12.50")
    row = parse_row(text)
    assert row["area_min"] == Decimal("12.50") and isinstance(row["area_min"], Decimal)
    assert row["updated_at"] == datetime.fromisoformat("2026-11-30T12:22:34.5+00:00")
    assert row["deleted_at"] is None


def _project_row() -> dict:
    pid, dev = uuid.uuid4(), uuid.uuid4()
    return {
        "id": str(pid),
        "tenant_id": str(dev),
        "developer_id": str(dev),
        "status": "Published",
        "name": "P",
        "type": "Hotel",
        "class": "Premium",
        "construction_status": "Delivered",
        "country_id": 643,
        "region_id": None,
        "city_id": None,
        "stars": 4,
        "hotelier_id": None,
        "currency_id": 643,
        "payback_years": Decimal("7.5"),
        "cover_image_file_id": None,
        "price_min": None,
        "price_max": None,
        "property_objects_total_count": 3,
        "property_objects_free_count": 0,
        "version": 5,
    }


def test_project_event_is_keyed_by_id_and_carries_the_new_version():
    row = _project_row()
    handbook = Handbook(
        countries={643: {"name": "Россия", "iso_code": "RUS"}},
        currencies={643: {"iso_code": "RUB", "name": "Российский рубль", "sign": "₽"}},
    )
    event = event_of("project", row, handbook, "corr")
    assert (event.event_type, event.aggregate_id, event.correlation_id) == (
        PROJECT_UPSERTED,
        row["id"],
        "corr",
    )
    assert event.payload["price"] is None
    assert event.payload["regionSnapshot"] is None and event.payload["citySnapshot"] is None
    assert event.payload["version"] == 5
    assert event.headers()["aggregateType"] == "Project"


def test_layout_group_event_has_area_range():
    row = {
        "id": str(uuid.uuid4()),
        "tenant_id": None,
        "project_id": None,
        "name": "G",
        "rooms": 2,
        "layouts_count": 2,
        "area_min": Decimal("30"),
        "area_max": Decimal("45.5"),
        "deleted_at": None,
        "version": 3,
    }
    event = event_of("layout_group", row, Handbook(), "c")
    assert event.event_type == LAYOUT_GROUP_UPSERTED
    assert event.payload["area"] == {"min": 30, "max": 45.5}
    assert event.payload["layoutsCount"] == 2


def test_drain_summary_rates():
    result = DrainResult(recalculated=8, skipped_archived=2, duration_seconds=0.5)
    summary = result.summary()
    assert summary["projectsPerSecond"] == 20.0
    assert summary["republished"] == {"project": 0, "layout": 0, "layout_group": 0}
    assert DrainResult().projects_per_second == 0.0

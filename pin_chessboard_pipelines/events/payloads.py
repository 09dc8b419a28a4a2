"""One builder per event contract (chessboard-store.md "Events", seed 003 for project-upserted).

Pure functions of a store row (a mapping with the table's column names) and, for projects, the
handbook replica. JSON-ready values: UUIDs as strings, timestamps RFC 3339, decimals as JSON
numbers (prices and areas fit the 15 significant digits a double keeps exactly).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

CONTRACT_VERSION = 1

DEVELOPER_UPSERTED = "pin.chessboard.developer-upserted"
PROJECT_UPSERTED = "pin.chessboard.project-upserted"
BUILDING_UPSERTED = "pin.chessboard.building-upserted"
LAYOUT_GROUP_UPSERTED = "pin.chessboard.layout-group-upserted"
LAYOUT_UPSERTED = "pin.chessboard.layout-upserted"
PROPERTY_OBJECT_UPSERTED = "pin.chessboard.property-object-upserted"
PROPERTY_OBJECT_PRICE_CHANGED = "pin.chessboard.property-object-price-changed"
PROPERTY_OBJECT_STATUS_CHANGED = "pin.chessboard.property-object-status-changed"

# event type -> (aggregate type, partitions of its topic)
EVENT_TYPES: dict[str, tuple[str, int]] = {
    DEVELOPER_UPSERTED: ("Developer", 3),
    PROJECT_UPSERTED: ("Project", 3),
    BUILDING_UPSERTED: ("Building", 3),
    LAYOUT_GROUP_UPSERTED: ("LayoutGroup", 3),
    LAYOUT_UPSERTED: ("Layout", 3),
    PROPERTY_OBJECT_UPSERTED: ("PropertyObject", 6),
    PROPERTY_OBJECT_PRICE_CHANGED: ("PropertyObject", 6),
    PROPERTY_OBJECT_STATUS_CHANGED: ("PropertyObject", 6),
}


def topic_of(event_type: str) -> str:
    return f"{event_type}.v{CONTRACT_VERSION}"


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and abs(value) < 2**53 else float(value)
    if isinstance(value, float):
        return value
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"no JSON form for {type(value).__name__}")


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _range(low: Any, high: Any) -> dict[str, Any] | None:
    if low is None and high is None:
        return None
    return {"min": json_value(low), "max": json_value(high)}


@dataclass(frozen=True)
class Handbook:
    """The handbook replica's display snapshots, keyed by id (loaded once per job)."""

    countries: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    regions: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    cities: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    currencies: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)

    def country_snapshot(self, country_id: int) -> dict[str, Any] | None:
        row = self.countries.get(country_id)
        return None if row is None else {"id": country_id, "name": row["name"], "isoCode": row["iso_code"]}

    def region_snapshot(self, region_id: int | None) -> dict[str, Any] | None:
        row = None if region_id is None else self.regions.get(region_id)
        return None if row is None else {"id": region_id, "name": row["name"]}

    def city_snapshot(self, city_id: int | None) -> dict[str, Any] | None:
        row = None if city_id is None else self.cities.get(city_id)
        return None if row is None else {"id": city_id, "name": row["name"]}

    def currency_snapshot(self, currency_id: int) -> dict[str, Any] | None:
        row = self.currencies.get(currency_id)
        if row is None:
            return None
        return {"id": currency_id, "isoCode": row["iso_code"], "name": row["name"], "sign": row["sign"]}


def developer_upserted(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": _str(row["id"]),
        "name": row["name"],
        "inn": row["inn"],
        "status": row["status"],
        "deletedAt": json_value(row["deleted_at"]),
        "version": row["version"],
    }


def project_upserted(row: Mapping[str, Any], handbook: Handbook) -> dict[str, Any]:
    """Exactly the 24 fields of ProjectUpsertedKafkaEvent (seed 003)."""
    return {
        "id": _str(row["id"]),
        "tenantId": _str(row["tenant_id"]),
        "developerId": _str(row["developer_id"]),
        "status": row["status"],
        "name": row["name"],
        "type": row["type"],
        "class": row["class"],
        "constructionStatus": row["construction_status"],
        "countryId": row["country_id"],
        "countrySnapshot": handbook.country_snapshot(row["country_id"]),
        "regionId": row["region_id"],
        "regionSnapshot": handbook.region_snapshot(row["region_id"]),
        "cityId": row["city_id"],
        "citySnapshot": handbook.city_snapshot(row["city_id"]),
        "stars": row["stars"],
        "hotelierId": _str(row["hotelier_id"]),
        "price": _range(row["price_min"], row["price_max"]),
        "currencyId": row["currency_id"],
        "currencySnapshot": handbook.currency_snapshot(row["currency_id"]),
        "propertyObjectsTotalCount": row["property_objects_total_count"],
        "propertyObjectsFreeCount": row["property_objects_free_count"],
        "paybackYears": json_value(row["payback_years"]),
        "coverImageFileId": _str(row["cover_image_file_id"]),
        "version": row["version"],
    }


def building_upserted(row: Mapping[str, Any]) -> dict[str, Any]:
    """Without the object counters: they are outside the building payload (seed 000, step 6)."""
    return {
        "id": _str(row["id"]),
        "tenantId": _str(row["tenant_id"]),
        "projectId": _str(row["project_id"]),
        "status": row["status"],
        "name": row["name"],
        "floorsCount": row["floors_count"],
        "deletedAt": json_value(row["deleted_at"]),
        "version": row["version"],
    }


def layout_group_upserted(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": _str(row["id"]),
        "tenantId": _str(row["tenant_id"]),
        "projectId": _str(row["project_id"]),
        "name": row["name"],
        "rooms": row["rooms"],
        "layoutsCount": row["layouts_count"],
        "area": _range(row["area_min"], row["area_max"]),
        "deletedAt": json_value(row["deleted_at"]),
        "version": row["version"],
    }


def layout_upserted(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": _str(row["id"]),
        "tenantId": _str(row["tenant_id"]),
        "projectId": _str(row["project_id"]),
        "layoutGroupId": _str(row["layout_group_id"]),
        "name": row["name"],
        "rooms": row["rooms"],
        "totalArea": json_value(row["total_area"]),
        "propertyObjectsCount": row["property_objects_count"],
        "deletedAt": json_value(row["deleted_at"]),
        "version": row["version"],
    }


def property_object_upserted(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": _str(row["id"]),
        "tenantId": _str(row["tenant_id"]),
        "projectId": _str(row["project_id"]),
        "buildingId": _str(row["building_id"]),
        "layoutId": _str(row["layout_id"]),
        "number": row["number"],
        "floor": row["floor"],
        "section": row["section"],
        "status": row["status"],
        "statusSource": row["status_source"],
        "price": json_value(row["price"]),
        "totalArea": json_value(row["total_area"]),
        "deletedAt": json_value(row["deleted_at"]),
        "version": row["version"],
    }


def property_object_price_changed(
    row: Mapping[str, Any], old_price: Decimal | None, source: str = "TalentSync"
) -> dict[str, Any]:
    return {
        "id": _str(row["id"]),
        "projectId": _str(row["project_id"]),
        "oldPrice": json_value(old_price),
        "newPrice": json_value(row["price"]),
        "source": source,
        "version": row["version"],
    }


def property_object_status_changed(
    row: Mapping[str, Any], old_status: str | None, source: str = "TalentSync"
) -> dict[str, Any]:
    return {
        "id": _str(row["id"]),
        "projectId": _str(row["project_id"]),
        "oldStatus": old_status,
        "newStatus": row["status"],
        "source": source,
        "version": row["version"],
    }

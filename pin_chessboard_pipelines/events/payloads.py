"""One builder per event contract (docs/events.md#payloads).

Pure functions of a store row (a mapping with the table's column names) and, for projects, the
handbook replica. JSON-ready values: UUIDs as strings, timestamps RFC 3339, decimals as JSON
numbers with exactly the stored digits (Decimal; events/exact_json.py encodes them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.events import exact_json
from pin_chessboard_pipelines.store.handbook_replica import Handbook

DEVELOPER_UPSERTED = entities.DEVELOPER.upserted_event
PROJECT_UPSERTED = entities.PROJECT.upserted_event
BUILDING_UPSERTED = entities.BUILDING.upserted_event
LAYOUT_GROUP_UPSERTED = entities.LAYOUT_GROUP.upserted_event
LAYOUT_UPSERTED = entities.LAYOUT.upserted_event
PROPERTY_OBJECT_UPSERTED = entities.PROPERTY_OBJECT.upserted_event
PROPERTY_OBJECT_PRICE_CHANGED = "pin.chessboard.property-object-price-changed"
PROPERTY_OBJECT_STATUS_CHANGED = "pin.chessboard.property-object-status-changed"

_PROPERTY_OBJECT = (entities.PROPERTY_OBJECT.aggregate_type, entities.PROPERTY_OBJECT.event_partitions)
# event type -> (aggregate type, partitions of its topic)
EVENT_TYPES: dict[str, tuple[str, int]] = {
    **{e.upserted_event: (e.aggregate_type, e.event_partitions) for e in ENTITIES},
    PROPERTY_OBJECT_PRICE_CHANGED: _PROPERTY_OBJECT,
    PROPERTY_OBJECT_STATUS_CHANGED: _PROPERTY_OBJECT,
}


def topic_of(event_type: str, version: int = 1) -> str:
    """The topic of an event type's contract version (events/contracts.py: which are published)."""
    return f"{event_type}.v{version}"


def json_value(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, Decimal):
        # the stored digits, never a binary float (docs/events.md#payloads); events/exact_json
        # writes a Decimal as a JSON number
        return exact_json.number(value)
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
    """Exactly the 24 fields of ProjectUpsertedKafkaEvent (docs/events.md)."""
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
    """Without the object counters: they are outside the building payload (docs/project-aggregates-recalc.md)."""
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


# entity name -> builder of its upserted event's payload from a store row
UPSERTED_PAYLOADS: dict[str, Callable[[Mapping[str, Any], Handbook], dict[str, Any]]] = {
    entities.DEVELOPER.name: lambda row, handbook: developer_upserted(row),
    entities.PROJECT.name: project_upserted,
    entities.BUILDING.name: lambda row, handbook: building_upserted(row),
    entities.LAYOUT_GROUP.name: lambda row, handbook: layout_group_upserted(row),
    entities.LAYOUT.name: lambda row, handbook: layout_upserted(row),
    entities.PROPERTY_OBJECT.name: lambda row, handbook: property_object_upserted(row),
}


def declared_payload(entity: entities.Entity) -> Callable[[Mapping[str, Any], Handbook], dict[str, Any]]:
    """The upserted payload of an entity without a builder of its own: its id, its declared columns
    (entities.py) by their camelCase names, deletedAt and version, JSON-ready (docs/events.md#payloads)."""
    fields = ("id", *(c.name for c in entity.columns), "deleted_at", "version")
    names = {f: _camel(f) for f in fields}
    return lambda row, handbook: {names[f]: json_value(row[f]) for f in fields}


def upserted_payload(entity: str) -> Callable[[Mapping[str, Any], Handbook], dict[str, Any]]:
    """The builder of an entity's upserted payload from a store row."""
    return UPSERTED_PAYLOADS.get(entity) or declared_payload(entities.entity(entity))


def _camel(column: str) -> str:
    head, *rest = column.split("_")
    return head + "".join(part.title() for part in rest)

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

from sqlalchemy import Integer, String

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


def _camel(column: str) -> str:
    head, *rest = column.split("_")
    return head + "".join(part.title() for part in rest)


def _declared(
    entity: entities.Entity, leave_out: tuple[str, ...] = ()
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """The builder of an upserted payload made of the row's id, the entity's declared columns
    (entities.py) but `leave_out` by their camelCase names, deletedAt and version, JSON-ready
    (docs/events.md#payloads). Text and integer values are JSON as they are: only the other
    columns' values go through json_value (a payload per property object is a hot path)."""
    columns = [c for c in entity.columns if c.name not in leave_out]
    fields = [
        ("id", True),
        *((c.name, not isinstance(c.type, String | Integer)) for c in columns),
        ("deleted_at", True),
        ("version", False),
    ]
    spec = tuple((_camel(f), f, convert) for f, convert in fields)
    return lambda row: {name: json_value(row[f]) if convert else row[f] for name, f, convert in spec}


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


# the object counters are outside the building payload (docs/project-aggregates-recalc.md)
building_upserted = _declared(
    entities.BUILDING, leave_out=("property_objects_total_count", "property_objects_free_count")
)


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


developer_upserted = _declared(entities.DEVELOPER)
layout_upserted = _declared(entities.LAYOUT)


def property_object_upserted(row: Mapping[str, Any]) -> dict[str, Any]:
    """The declared payload (_declared) written out: a literal builds in half the time, and an
    import builds one per property object."""
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
    return _changed(row, "Price", json_value(old_price), json_value(row["price"]), source)


def property_object_status_changed(
    row: Mapping[str, Any], old_status: str | None, source: str = "TalentSync"
) -> dict[str, Any]:
    return _changed(row, "Status", old_status, row["status"], source)


def _changed(row: Mapping[str, Any], name: str, old: Any, new: Any, source: str) -> dict[str, Any]:
    """A property object's change event: its id and project, the old and new value, by whom."""
    return {
        "id": _str(row["id"]),
        "projectId": _str(row["project_id"]),
        f"old{name}": old,
        f"new{name}": new,
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
    """The upserted payload of an entity without a builder of its own (see _declared)."""
    payload = _declared(entity)
    return lambda row, handbook: payload(row)


def upserted_payload(entity: str) -> Callable[[Mapping[str, Any], Handbook], dict[str, Any]]:
    """The builder of an entity's upserted payload from a store row."""
    return UPSERTED_PAYLOADS.get(entity) or declared_payload(entities.entity(entity))

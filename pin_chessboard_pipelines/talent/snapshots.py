"""Talent snapshots (docs/talent-source.md#snapshots): validation and mapping to replica columns.

Pure: a raw snapshot (the decoded JSON object) and the handbook replica in, a `TalentRecord`
(the replica column values, named as in store/tables.py) or a `SnapshotError` out. The same
function serves ApiPull, TopicReplay and the streaming sync, so every source maps alike.

Ids (Talent ids and the PIN ids derived from them) are canonical UUID strings (lower case,
hyphenated): what PostgreSQL casts to uuid and what the events carry, without building a
uuid.UUID per id on the hot path (an import applies millions of them).

What the caller does with the reports: unknown enum values -> fallback already applied, warning +
`chessboard_sync_unknown_enum_total{enum,value}`; unresolved region/city -> NULL already stored,
warning + `chessboard_sync_unresolved_reference_total{reference}`.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from pin_chessboard_pipelines.entities import NAMES as ENTITIES
from pin_chessboard_pipelines.entities import PIN_NAMESPACE
from pin_chessboard_pipelines.errors import SYNC_UNKNOWN_REFERENCE, SYNC_VALIDATION_FAILED, SnapshotInvalid
from pin_chessboard_pipelines.store.handbook_replica import Handbook

# Enums (docs/talent-source.md#enums-and-references): field -> (metric label, values, fallback).
PROJECT_TYPES = ("ResidentialComplex", "ApartHotel", "Hotel", "Villa")
PROJECT_CLASSES = ("Standard", "Comfort", "Business", "Premium", "Elite")
CONSTRUCTION_STATUSES = ("Planned", "UnderConstruction", "Commissioned", "Delivered")
PROPERTY_OBJECT_STATUSES = ("Free", "Reserved", "Booked", "Sold", "Hidden")

# The values map to themselves: the mapped record holds the one shared string of each value.
ENUM_FALLBACKS: dict[str, tuple[dict[str, str], str]] = {
    "project.type": ({v: v for v in PROJECT_TYPES}, "ResidentialComplex"),
    "project.class": ({v: v for v in PROJECT_CLASSES}, "Comfort"),
    "project.constructionStatus": ({v: v for v in CONSTRUCTION_STATUSES}, "UnderConstruction"),
    "propertyObject.status": ({v: v for v in PROPERTY_OBJECT_STATUSES}, "Hidden"),  # fail closed
}

INT16 = (-(2**15), 2**15 - 1)
INT64 = (-(2**63), 2**63 - 1)
MAX_PRICE = Decimal(10) ** 12
MAX_AREA = Decimal(10000)
# More fractional digits than any price, area or payback needs; keeps `numeric` values sane.
MAX_DECIMAL_SCALE = 32
ERROR_MESSAGE_LIMIT = 1024

# re.ASCII: \d is 0-9 only (a str pattern's \d also matches other scripts' digits).
_NUMERIC = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))",
    re.ASCII,
)
_INN = re.compile(r"\d{10}|\d{12}", re.ASCII)
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
_NAMESPACE_BYTES = PIN_NAMESPACE.bytes


def pin_id_text(entity: str, talent_id: str) -> str:
    """entities.pin_id as a canonical string, for a canonical Talent id string (uuid5 by hand:
    the same SHA-1, version and variant bits, without the uuid.UUID round trips)."""
    digest = bytearray(hashlib.sha1(_NAMESPACE_BYTES + f"{entity}:{talent_id}".encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50
    digest[8] = (digest[8] & 0x3F) | 0x80
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# Parents repeat across a page (one building for hundreds of objects): their PIN ids are cached.
_parent_pin = functools.lru_cache(maxsize=1 << 16)(pin_id_text)


def canonical_uuid(value: str) -> str:
    """A UUID string in canonical form; ValueError when it is not a UUID."""
    if len(value) == 36 and _CANONICAL_UUID.fullmatch(value):
        return value.lower()
    return str(UUID(value))


@dataclass(frozen=True, slots=True)
class SnapshotError:
    """A poison item: quarantined with `code`, never fails the page."""

    code: str
    message: str
    external_id: str | None


@dataclass(frozen=True, slots=True)
class TalentRecord:
    """A valid snapshot, mapped.

    `columns` holds the replica columns the snapshot determines: id (PIN id), external_talent_id,
    replica_version, deleted_at, the entity's fields and the PIN ids of its parents
    (developer_id / project_id / building_id / layout_group_id / layout_id). Columns that come from
    the parent rows (tenant_id of children, project_id of a property object) are filled by the
    apply path. `parents` maps parent entity -> Talent id for every parent link that is set.
    """

    entity: str
    talent_id: str  # canonical UUID string
    version: int
    columns: dict[str, Any]
    parents: dict[str, str] = field(default_factory=dict)
    unknown_enums: tuple[tuple[str, str], ...] = ()  # (enum, original value)
    unresolved_references: tuple[str, ...] = ()  # "regionId" / "cityId"

    @property
    def pin_id(self) -> str:
        return self.columns["id"]


def _missing(name: str) -> SnapshotInvalid:
    return SnapshotInvalid(f"{name}: required field is missing")


def _absent(name: str, required: bool) -> Any:
    """A field that is absent or null: None, unless it is required."""
    if required:
        raise _missing(name)
    return None


def _uuid(raw: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = raw.get(name)
    if value is None:
        return _absent(name, required)
    if not isinstance(value, str):
        raise SnapshotInvalid(f"{name}: expected a UUID string, got {type(value).__name__}")
    try:
        return canonical_uuid(value)
    except ValueError:
        raise SnapshotInvalid(f"{name}: {value[:64]!r} is not a UUID") from None


def _int(raw: Mapping[str, Any], name: str, lo: int, hi: int, required: bool = True) -> int | None:
    value = raw.get(name)
    if value is None:
        return _absent(name, required)
    if type(value) is not int:  # bool is an int subclass, but not a JSON integer
        raise SnapshotInvalid(f"{name}: expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise SnapshotInvalid(f"{name}: {value} is outside {lo}..{hi}")
    return value


def _text(raw: Mapping[str, Any], name: str, lo: int, hi: int, required: bool = True) -> str | None:
    value = raw.get(name)
    if value is None:
        return _absent(name, required)
    if not isinstance(value, str):
        raise SnapshotInvalid(f"{name}: expected a string, got {type(value).__name__}")
    if not lo <= len(value) <= hi:
        raise SnapshotInvalid(f"{name}: length {len(value)} is outside {lo}..{hi}")
    _storable(name, value)
    return value


def _storable(name: str, value: str) -> None:
    """PostgreSQL text holds neither NUL nor lone surrogates: such a value is poison, not a page crash."""
    if "\x00" in value:
        raise SnapshotInvalid(f"{name}: contains a NUL character")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise SnapshotInvalid(f"{name}: is not valid Unicode text") from None


def parse_decimal(value: Any) -> Decimal:
    """A JSON number (int, float or Decimal) or a numeric string -> Decimal; ValueError otherwise
    (NaN, Infinity, junk)."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a decimal")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, Decimal):  # JSON decoded with parse_float=Decimal
        if not value.is_finite():
            raise ValueError("not a finite number")
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        return Decimal(repr(value))
    if isinstance(value, str):
        text = value.strip()
        if not _NUMERIC.fullmatch(text):
            raise ValueError(f"{value[:64]!r} is not a number")
        try:
            return Decimal(text)
        except InvalidOperation:
            raise ValueError(f"{value[:64]!r} is not a number") from None
    raise ValueError(f"expected a number or a numeric string, got {type(value).__name__}")


def _decimal(
    raw: Mapping[str, Any],
    name: str,
    *,
    low: Decimal,
    high: Decimal | None,
    low_inclusive: bool,
    required: bool = True,
) -> Decimal | None:
    value = raw.get(name)
    if value is None:
        return _absent(name, required)
    try:
        number = parse_decimal(value)
    except ValueError as exc:
        raise SnapshotInvalid(f"{name}: {exc}") from None
    exponent = number.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > MAX_DECIMAL_SCALE:
        raise SnapshotInvalid(f"{name}: more than {MAX_DECIMAL_SCALE} fractional digits")
    too_low = number < low if low_inclusive else number <= low
    if too_low or (high is not None and number > high):
        bound = f"{'>=' if low_inclusive else '>'} {low}" + (f" and <= {high}" if high is not None else "")
        raise SnapshotInvalid(f"{name}: {value!s:.64} must be {bound}")
    return number


def parse_rfc3339(value: str) -> datetime:
    """An RFC 3339 date-time -> aware datetime; ValueError otherwise."""
    match = _RFC3339.fullmatch(value.strip())
    if not match:
        raise ValueError(f"{value[:64]!r} is not an RFC 3339 date-time")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_h, off_m = match.groups()
    if zulu:
        tz = UTC
    else:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        tz = timezone(-offset if sign == "-" else offset)
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz
        )
    except ValueError:
        raise ValueError(f"{value[:64]!r} is not an RFC 3339 date-time") from None


def _deleted_at(raw: Mapping[str, Any]) -> datetime | None:
    value = raw.get("deletedAt")
    if value is None:
        return None
    if not isinstance(value, str):
        raise SnapshotInvalid(f"deletedAt: expected an RFC 3339 string, got {type(value).__name__}")
    try:
        return parse_rfc3339(value)
    except ValueError as exc:
        raise SnapshotInvalid(f"deletedAt: {exc}") from None


def _enum(raw: Mapping[str, Any], name: str, enum: str, unknown: list[tuple[str, str]]) -> str:
    value = raw.get(name)
    if value is None:
        raise _missing(name)
    if not isinstance(value, str):
        raise SnapshotInvalid(f"{name}: expected a string, got {type(value).__name__}")
    values, fallback = ENUM_FALLBACKS[enum]
    known = values.get(value)
    if known is not None:
        return known
    unknown.append((enum, value[:64]))
    return fallback


def _common(entity: str, raw: Mapping[str, Any]) -> tuple[str, int, dict[str, Any]]:
    talent_id = _uuid(raw, "id")
    assert talent_id is not None
    version = _int(raw, "version", 1, INT64[1])
    assert version is not None
    columns = {
        "id": pin_id_text(entity, talent_id),
        "external_talent_id": talent_id,
        "replica_version": version,
        "deleted_at": _deleted_at(raw),
    }
    return talent_id, version, columns


def _developer(raw: Mapping[str, Any], handbook: Handbook) -> TalentRecord:
    talent_id, version, columns = _common("developer", raw)
    columns["name"] = _text(raw, "name", 1, 256)
    inn = raw.get("inn")
    if inn is not None and not (isinstance(inn, str) and _INN.fullmatch(inn)):
        raise SnapshotInvalid(f"inn: {str(inn)[:32]!r} is not 10 or 12 digits")
    columns["inn"] = inn
    return TalentRecord("developer", talent_id, version, columns)


def _project(raw: Mapping[str, Any], handbook: Handbook) -> TalentRecord:
    talent_id, version, columns = _common("project", raw)
    developer = _uuid(raw, "developerId")
    assert developer is not None
    unknown: list[tuple[str, str]] = []
    columns["name"] = _text(raw, "name", 1, 256)
    columns["type"] = _enum(raw, "type", "project.type", unknown)
    columns["class"] = _enum(raw, "class", "project.class", unknown)
    columns["construction_status"] = _enum(raw, "constructionStatus", "project.constructionStatus", unknown)
    country = _int(raw, "countryId", *INT16)
    region = _int(raw, "regionId", *INT64, required=False)
    city = _int(raw, "cityId", *INT64, required=False)
    columns["stars"] = _int(raw, "stars", 1, 5, required=False)
    currency = _int(raw, "currencyId", *INT16)
    columns["payback_years"] = _decimal(
        raw, "paybackYears", low=Decimal(0), high=None, low_inclusive=False, required=False
    )
    if country not in handbook.countries:
        raise SnapshotInvalid(f"countryId: {country} is not in the handbook", SYNC_UNKNOWN_REFERENCE)
    if currency not in handbook.currencies:
        raise SnapshotInvalid(f"currencyId: {currency} is not in the handbook", SYNC_UNKNOWN_REFERENCE)
    # Region and city resolve independently: an unknown one is stored as NULL
    # (docs/talent-source.md#enums-and-references).
    unresolved = []
    if region is not None and region not in handbook.regions:
        unresolved.append("regionId")
        region = None
    if city is not None and city not in handbook.cities:
        unresolved.append("cityId")
        city = None
    developer_pin = _parent_pin("developer", developer)
    columns.update(
        country_id=country,
        region_id=region,
        city_id=city,
        currency_id=currency,
        developer_id=developer_pin,
        tenant_id=developer_pin,  # tenant boundary = developer (docs/events.md, tenantId)
    )
    return TalentRecord(
        "project", talent_id, version, columns, {"developer": developer}, tuple(unknown), tuple(unresolved)
    )


def _project_child(entity: str, raw: Mapping[str, Any]) -> tuple[str, int, dict[str, Any], str]:
    """_common and what every child of a project carries: its project (Talent id, PIN) and name."""
    talent_id, version, columns = _common(entity, raw)
    project = _uuid(raw, "projectId")
    assert project is not None
    columns["project_id"] = _parent_pin("project", project)
    columns["name"] = _text(raw, "name", 1, 256)
    return talent_id, version, columns, project


def _building(raw: Mapping[str, Any], handbook: Handbook) -> TalentRecord:
    talent_id, version, columns, project = _project_child("building", raw)
    columns["floors_count"] = _int(raw, "floorsCount", 1, 200)
    return TalentRecord("building", talent_id, version, columns, {"project": project})


def _layout_group(raw: Mapping[str, Any], handbook: Handbook) -> TalentRecord:
    talent_id, version, columns, project = _project_child("layoutGroup", raw)
    columns["rooms"] = _int(raw, "rooms", 0, 10)
    return TalentRecord("layoutGroup", talent_id, version, columns, {"project": project})


def _layout(raw: Mapping[str, Any], handbook: Handbook) -> TalentRecord:
    talent_id, version, columns, project = _project_child("layout", raw)
    group = _uuid(raw, "layoutGroupId", required=False)
    columns["rooms"] = _int(raw, "rooms", 0, 10)
    columns["total_area"] = _decimal(raw, "totalArea", low=Decimal(0), high=MAX_AREA, low_inclusive=False)
    columns["layout_group_id"] = None if group is None else _parent_pin("layoutGroup", group)
    parents = {"project": project}
    if group is not None:
        parents["layoutGroup"] = group
    return TalentRecord("layout", talent_id, version, columns, parents)


def _property_object(raw: Mapping[str, Any], handbook: Handbook) -> TalentRecord:
    talent_id, version, columns = _common("propertyObject", raw)
    building = _uuid(raw, "buildingId")
    assert building is not None
    layout = _uuid(raw, "layoutId", required=False)
    unknown: list[tuple[str, str]] = []
    columns["number"] = _text(raw, "number", 1, 32)
    columns["floor"] = _int(raw, "floor", -5, 200)
    columns["section"] = _int(raw, "section", 1, 100, required=False)
    columns["status"] = _enum(raw, "status", "propertyObject.status", unknown)
    columns["price"] = _decimal(
        raw, "price", low=Decimal(0), high=MAX_PRICE, low_inclusive=True, required=False
    )
    columns["total_area"] = _decimal(
        raw, "totalArea", low=Decimal(0), high=MAX_AREA, low_inclusive=False, required=False
    )
    columns["building_id"] = _parent_pin("building", building)
    columns["layout_id"] = None if layout is None else _parent_pin("layout", layout)
    parents = {"building": building}
    if layout is not None:
        parents["layout"] = layout
    return TalentRecord("propertyObject", talent_id, version, columns, parents, tuple(unknown))


_PARSERS = {
    "developer": _developer,
    "project": _project,
    "building": _building,
    "layoutGroup": _layout_group,
    "layout": _layout,
    "propertyObject": _property_object,
}


def external_id_of(raw: Any) -> str | None:
    """The snapshot's id as given (for quarantine rows and logs), even when it is not a valid UUID."""
    if isinstance(raw, Mapping):
        value = raw.get("id")
        if value is not None:
            return str(value)[:64]
    return None


def parse_snapshot(entity: str, raw: Any, handbook: Handbook) -> TalentRecord | SnapshotError:
    """Validates one raw snapshot of `entity` and maps it to replica columns."""
    try:
        parser = _PARSERS[entity]
    except KeyError:
        raise ValueError(f"unknown Talent entity {entity!r}: expected one of {', '.join(ENTITIES)}") from None
    if not isinstance(raw, Mapping):
        return SnapshotError(
            SYNC_VALIDATION_FAILED, f"snapshot is not a JSON object: {type(raw).__name__}", None
        )
    try:
        return parser(raw, handbook)
    except SnapshotInvalid as exc:
        return SnapshotError(exc.code, f"{entity} {exc}"[:ERROR_MESSAGE_LIMIT], external_id_of(raw))

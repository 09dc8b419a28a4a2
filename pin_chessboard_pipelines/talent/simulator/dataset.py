"""A deterministic synthetic Talent dataset, computed lazily by index arithmetic.

Nothing is stored: every snapshot is a pure function of (spec, collection, index), so the "1m"
preset costs no memory. Ids are UUIDs that encode the collection and the index (see `entity_id`),
which turns `by-ids` lookups and the developerId / projectId filters into O(1) arithmetic.

Ownership (P = projects_per_developer, n = per-project count of a collection):
developer d owns projects [d*P, (d+1)*P); project p owns items [p*n, (p+1)*n) of buildings,
layout-groups, layouts and property-objects. A filter is therefore always one contiguous index
range, and every listing is ordered by index.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.errors import DatasetError, InvalidQuery, UnknownCollection
from pin_chessboard_pipelines.store.handbook import CITIES

Item = dict[str, Any]

FAULT_KINDS = ("503", "429", "malformed")
POISON_KINDS = ("floor", "price", "duplicate-number")
UNKNOWN_REFERENCE_ID = 999  # neither a region nor a city of the handbook

PROJECT_TYPES = ("ResidentialComplex", "ApartHotel", "Hotel", "Villa")
PROJECT_CLASSES = ("Standard", "Comfort", "Business", "Premium", "Elite")
CONSTRUCTION_STATUSES = ("Planned", "UnderConstruction", "Commissioned", "Delivered")
OBJECT_STATUSES = ("Free", "Reserved", "Booked", "Sold", "Hidden")
# Values outside the contract's enum lists, for the unknown_enum_every knob.
UNKNOWN_PROJECT_ENUMS = (("type", "Castle"), ("class", "Luxury"), ("constructionStatus", "Frozen"))
UNKNOWN_OBJECT_STATUS = "Frozen"

_DEVELOPER_WORDS = ("Север", "Эталон", "Гранель", "Основа", "Сити", "Перспектива", "Форма", "Горизонт")
_PROJECT_WORDS = ("Северный", "Солнечный", "Морской", "Парковый", "Речной", "Лесной", "Центральный")
_FOREIGN_COUNTRIES = (784, 792, 764, 360)
_CITY_REGIONS: tuple[tuple[int, int], ...] = tuple(
    (cast(int, c["id"]), cast(int, c["region_id"])) for c in CITIES
)
_M64 = (1 << 64) - 1
_INDEX_BITS = 62  # the top two bits of the low half carry the UUID variant


@dataclass(frozen=True)
class FaultRule:
    """Answer page `page_no` (0-based, of a walk with one limit) of `collection` with `kind`, `times` times."""

    collection: str
    page_no: int
    kind: str  # "503" | "429" | "malformed"
    times: int = 1

    def __post_init__(self) -> None:
        if self.collection not in COLLECTIONS:
            raise DatasetError(f"fault collection {self.collection!r} is not one of {', '.join(COLLECTIONS)}")
        if self.kind not in FAULT_KINDS:
            raise DatasetError(f"fault kind {self.kind!r} is not one of {', '.join(FAULT_KINDS)}")
        if self.page_no < 0 or self.times < 1:
            raise DatasetError("fault page_no must be >= 0 and times >= 1")


@dataclass(frozen=True)
class DatasetSpec:
    """The knobs of the synthetic dataset; the defaults are the "tiny" preset.

    The *_every knobs mark every Nth item (index N-1, 2N-1, ...) of a collection; 0 = none.
    """

    seed: int = 1
    developers: int = 1
    projects_per_developer: int = 2
    buildings_per_project: int = 1
    layout_groups_per_project: int = 2
    layouts_per_project: int = 3
    objects_per_project: int = 10
    poison_every: int = 0  # property objects breaking a hard rule (see poison_kind)
    unknown_enum_every: int = 0  # projects and property objects with an enum value outside the list
    deleted_every: int = 0  # entities of every collection carrying deletedAt
    unknown_reference_every: int = 0  # projects with a regionId / cityId the handbook does not know
    version: int = 1  # generation: added to every entity's version (minus 1)
    # projects naming the next developer as their owner (a Talent that moves a project to another
    # developer, which the replica refuses: CHESSBOARD_SYNC_IMMUTABLE_CHANGED); the developerId
    # filter still lists them under their first developer
    owner_changed_every: int = 0
    developer_renames: int = 0  # each developer renamed this many times (its name's word moves on)
    latency_ms: int = 0  # server: sleep per request
    faults: tuple[FaultRule, ...] = ()  # server: injected failures

    def __post_init__(self) -> None:
        faults = tuple(f if isinstance(f, FaultRule) else FaultRule(*f) for f in self.faults)
        object.__setattr__(self, "faults", faults)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "faults" and (not isinstance(value, int) or isinstance(value, bool)):
                raise DatasetError(f"{f.name} must be an integer, got {value!r}")
            if f.name not in ("faults", "seed") and value < 0:
                raise DatasetError(f"{f.name} must be >= 0, got {value}")
        if self.version < 1:
            raise DatasetError(f"version must be >= 1, got {self.version}")
        if self.objects_per_project and not self.buildings_per_project:
            raise DatasetError("objects_per_project > 0 needs buildings_per_project >= 1")
        if self.developers * self.projects_per_developer * self.largest_per_project() >= 1 << _INDEX_BITS:
            raise DatasetError("the dataset is too large for 62-bit indexes")

    def largest_per_project(self) -> int:
        return max(
            1,
            self.buildings_per_project,
            self.layout_groups_per_project,
            self.layouts_per_project,
            self.objects_per_project,
        )

    @staticmethod
    def preset(name: str) -> DatasetSpec:
        try:
            return PRESETS[name]
        except KeyError:
            raise DatasetError(
                f"unknown dataset preset {name!r}: expected one of {', '.join(PRESETS)}"
            ) from None

    def with_overrides(self, pairs: Iterable[str]) -> DatasetSpec:
        """Apply CLI-style `key=value` overrides (`poison_every=50`, `faults=projects:0:503:2,...`)."""
        changes: dict[str, Any] = {}
        names = {f.name for f in dataclasses.fields(self)}
        for pair in pairs:
            key, sep, raw = pair.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or not key:
                raise DatasetError(f"--set {pair!r}: expected key=value")
            if key not in names:
                raise DatasetError(
                    f"--set {pair!r}: unknown key {key!r}, expected one of {', '.join(sorted(names))}"
                )
            if key == "faults":
                changes[key] = parse_faults(raw)
                continue
            try:
                changes[key] = int(raw.strip())
            except ValueError:
                raise DatasetError(f"--set {pair!r}: {key} expects an integer") from None
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        return " ".join(f"{c}={count(self, c)}" for c in COLLECTIONS)


def parse_faults(text: str) -> tuple[FaultRule, ...]:
    """`collection:page_no:kind[:times]`, comma separated; an empty string = no faults."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        fields = part.split(":")
        if len(fields) not in (3, 4):
            raise DatasetError(f"fault {part!r}: expected collection:page_no:kind[:times]")
        try:
            page_no, times = int(fields[1]), int(fields[3]) if len(fields) == 4 else 1
        except ValueError:
            raise DatasetError(f"fault {part!r}: page_no and times must be integers") from None
        rules.append(FaultRule(fields[0], page_no, fields[2], times))
    return tuple(rules)


PRESETS: dict[str, DatasetSpec] = {
    "tiny": DatasetSpec(),
    "demo": DatasetSpec(
        developers=3,
        projects_per_developer=4,
        buildings_per_project=3,
        layout_groups_per_project=4,
        layouts_per_project=8,
        objects_per_project=100,
    ),
    "1m": DatasetSpec(
        developers=100,
        projects_per_developer=100,
        buildings_per_project=5,
        layout_groups_per_project=4,
        layouts_per_project=10,
        objects_per_project=100,
    ),
}


# ---------------------------------------------------------------------------------------------
# Ids


@functools.lru_cache(maxsize=64)
def _prefixes(seed: int) -> dict[str, int]:
    """The high 64 bits of every id of a collection: a hash of (seed, collection), UUID version 8."""
    out = {}
    for collection in COLLECTIONS:
        digest = hashlib.blake2b(f"{seed}:{collection}".encode(), digest_size=8).digest()
        out[collection] = (int.from_bytes(digest, "big") & ~0xF000) | 0x8000
    return out


@functools.lru_cache(maxsize=64)
def _collections_by_prefix(seed: int) -> dict[int, str]:
    return {prefix: collection for collection, prefix in _prefixes(seed).items()}


def entity_id(spec: DatasetSpec, collection: str, index: int) -> str:
    """The id of item `index` of `collection`: high half = collection hash, low half = variant | index."""
    h = f"{(_prefixes(spec.seed)[collection] << 64) | (1 << 63) | index:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def decode_id(spec: DatasetSpec, talent_id: str) -> tuple[str, int] | None:
    """(collection, index) of an id of this dataset, or None for anything else (including out of range)."""
    try:
        value = uuid.UUID(talent_id).int
    except (ValueError, TypeError, AttributeError):
        return None
    collection = _collections_by_prefix(spec.seed).get(value >> 64)
    low = value & _M64
    if collection is None or low >> _INDEX_BITS != 0b10:
        return None
    index = low & ((1 << _INDEX_BITS) - 1)
    return (collection, index) if index < count(spec, collection) else None


def index_of(spec: DatasetSpec, collection: str, talent_id: str) -> int | None:
    decoded = decode_id(spec, talent_id)
    return decoded[1] if decoded is not None and decoded[0] == collection else None


# ---------------------------------------------------------------------------------------------
# Sizes and ranges


def _per_project(spec: DatasetSpec, collection: str) -> int:
    if collection == "projects":
        return 1
    if collection == "buildings":
        return spec.buildings_per_project
    if collection == "layout-groups":
        return spec.layout_groups_per_project
    if collection == "layouts":
        return spec.layouts_per_project
    if collection == "property-objects":
        return spec.objects_per_project
    raise UnknownCollection(f"unknown collection {collection!r}")


def _check_collection(collection: str) -> None:
    if collection not in COLLECTIONS:
        raise UnknownCollection(f"unknown collection {collection!r}")


def index_range(
    spec: DatasetSpec, collection: str, developer_id: str | None = None, project_id: str | None = None
) -> range:
    """The contiguous indexes of `collection` a listing with these filters walks."""
    _check_collection(collection)
    if developer_id and project_id:
        raise InvalidQuery("developerId and projectId are mutually exclusive")
    per_developer = spec.projects_per_developer
    if collection == "developers":
        if developer_id:
            d = index_of(spec, "developers", developer_id)
        elif project_id:
            p = index_of(spec, "projects", project_id)
            d = None if p is None else p // per_developer
        else:
            return range(spec.developers)
        return range(0) if d is None else range(d, d + 1)
    n = _per_project(spec, collection)
    if developer_id:
        d = index_of(spec, "developers", developer_id)
        return range(0) if d is None else range(d * per_developer * n, (d + 1) * per_developer * n)
    if project_id:
        p = index_of(spec, "projects", project_id)
        return range(0) if p is None else range(p * n, (p + 1) * n)
    return range(spec.developers * per_developer * n)


def count(
    spec: DatasetSpec, collection: str, developer_id: str | None = None, project_id: str | None = None
) -> int:
    return len(index_range(spec, collection, developer_id, project_id))


# ---------------------------------------------------------------------------------------------
# Paging


def encode_cursor(collection: str, index: int) -> str:
    return base64.urlsafe_b64encode(f"{collection}:{index}".encode()).decode().rstrip("=")


def _decode_cursor(collection: str, cursor: str, span: range) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        cursor_collection, _, index_text = raw.rpartition(":")
        index = int(index_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidQuery("cursor is not a cursor of this API") from None
    if cursor_collection != collection or not span.start <= index <= span.stop:
        raise InvalidQuery("cursor does not belong to this listing")
    return index


def page_start(
    spec: DatasetSpec,
    collection: str,
    cursor: str | None,
    developer_id: str | None = None,
    project_id: str | None = None,
) -> tuple[range, int]:
    """(the listing's index range, the index the page at `cursor` starts at)."""
    span = index_range(spec, collection, developer_id, project_id)
    return span, span.start if not cursor else _decode_cursor(collection, cursor, span)


def page_number(
    spec: DatasetSpec,
    collection: str,
    cursor: str | None,
    limit: int,
    developer_id: str | None = None,
    project_id: str | None = None,
) -> int:
    """0-based number of the page at `cursor` in a walk with this limit (the key of fault rules)."""
    span, start = page_start(spec, collection, cursor, developer_id, project_id)
    return (start - span.start) // limit


def list_page(
    spec: DatasetSpec,
    collection: str,
    cursor: str | None,
    limit: int,
    developer_id: str | None = None,
    project_id: str | None = None,
) -> tuple[list[Item], str | None]:
    """One page of a listing: (items, nextCursor); nextCursor None = last page."""
    if limit < 1:
        raise InvalidQuery("limit must be >= 1")
    span, start = page_start(spec, collection, cursor, developer_id, project_id)
    stop = min(span.stop, start + limit)
    build = _BUILDERS[collection]
    items = [build(spec, i) for i in range(start, stop)]
    return items, (encode_cursor(collection, stop) if stop < span.stop else None)


def by_ids(spec: DatasetSpec, ids: Iterable[str], collection: str = "property-objects") -> list[Item]:
    """The items of `collection` among `ids`, in the order asked, each once; unknown ids are left out."""
    _check_collection(collection)
    seen: set[int] = set()
    items = []
    build = _BUILDERS[collection]
    for talent_id in ids:
        index = index_of(spec, collection, talent_id)
        if index is not None and index not in seen:
            seen.add(index)
            items.append(build(spec, index))
    return items


def item(spec: DatasetSpec, collection: str, index: int) -> Item:
    _check_collection(collection)
    if not 0 <= index < count(spec, collection):
        raise IndexError(f"{collection}[{index}] is out of range")
    return _BUILDERS[collection](spec, index)


def iter_items(
    spec: DatasetSpec, collection: str, developer_id: str | None = None, project_id: str | None = None
) -> Iterator[Item]:
    """Every item of a listing, one at a time (flat memory)."""
    build = _BUILDERS[collection]
    for i in index_range(spec, collection, developer_id, project_id):
        yield build(spec, i)


# ---------------------------------------------------------------------------------------------
# Knobs


def _every(n: int, index: int) -> bool:
    return n > 0 and (index + 1) % n == 0


def poison_kind(spec: DatasetSpec, index: int) -> str | None:
    """How property object `index` breaks the contract, or None: "floor", "price" or "duplicate-number"."""
    n = spec.poison_every
    if not _every(n, index):
        return None
    kind = POISON_KINDS[((index + 1) // n) % len(POISON_KINDS)]
    # The duplicate copies the number of the previous object of the building, which must be live.
    if kind == "duplicate-number" and (
        n == 1 or _object_place(spec, index)[1] == 0 or _every(spec.deleted_every, index - 1)
    ):
        kind = "floor"
    return kind


def is_deleted(spec: DatasetSpec, collection: str, index: int) -> bool:
    """Whether the item carries deletedAt (a poison object never does, so it stays poison)."""
    if collection == "property-objects" and poison_kind(spec, index):
        return False
    return _every(spec.deleted_every, index)


def unknown_enum_field(spec: DatasetSpec, collection: str, index: int) -> str | None:
    """The enum field of a project / property object that carries a value outside its list, or None."""
    n = spec.unknown_enum_every
    if not _every(n, index):
        return None
    if collection == "projects":
        return UNKNOWN_PROJECT_ENUMS[((index + 1) // n) % len(UNKNOWN_PROJECT_ENUMS)][0]
    return "status" if collection == "property-objects" else None


def unknown_reference_fields(spec: DatasetSpec, index: int) -> tuple[str, ...]:
    """The reference fields of project `index` the handbook does not know: regionId, cityId or both."""
    n = spec.unknown_reference_every
    if not _every(n, index):
        return ()
    return (("regionId",), ("cityId",), ("regionId", "cityId"))[((index + 1) // n) % 3]


# ---------------------------------------------------------------------------------------------
# Snapshots


def _mix(x: int) -> int:
    """splitmix64 finalizer: a cheap, well-spread 64-bit hash."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _hash(spec: DatasetSpec, collection: str, index: int) -> int:
    return _mix(_prefixes(spec.seed)[collection] ^ index)


def _version(spec: DatasetSpec, h: int) -> int:
    return 1 + (h >> 56) % 3 + spec.version - 1


def _deleted_at(spec: DatasetSpec, collection: str, index: int, h: int) -> str | None:
    if not is_deleted(spec, collection, index):
        return None
    return f"2024-{1 + (h >> 40) % 12:02d}-{1 + (h >> 44) % 28:02d}T{(h >> 50) % 24:02d}:15:00Z"


def _decimal(hundredths: int) -> str:
    sign = "-" if hundredths < 0 else ""
    hundredths = abs(hundredths)
    return f"{sign}{hundredths // 100}.{hundredths % 100:02d}"


def _developer(spec: DatasetSpec, i: int) -> Item:
    h = _hash(spec, "developers", i)
    inn_kind = (h >> 8) % 7
    if inn_kind == 0:
        inn = None
    elif inn_kind == 1:  # an individual entrepreneur: 12 digits
        inn = str(10**11 + (h >> 16) % (9 * 10**11))
    else:
        inn = str(10**9 + (h >> 16) % (9 * 10**9))
    return {
        "id": entity_id(spec, "developers", i),
        "version": _version(spec, h),
        "name": f"ГК {_DEVELOPER_WORDS[(h + spec.developer_renames) % len(_DEVELOPER_WORDS)]} {i + 1}",
        "inn": inn,
        "deletedAt": _deleted_at(spec, "developers", i, h),
    }


def project_owner(spec: DatasetSpec, p: int) -> int:
    """The developer index project `p` names: its own, or the next one for an owner change."""
    own = p // spec.projects_per_developer
    if _every(spec.owner_changed_every, p) and spec.developers > 1:
        return (own + 1) % spec.developers
    return own


def _project(spec: DatasetSpec, p: int) -> Item:
    h = _hash(spec, "projects", p)
    roll = h % 100
    project_type = PROJECT_TYPES[0 if roll < 70 else 1 if roll < 82 else 2 if roll < 92 else 3]
    values = {
        "type": project_type,
        "class": PROJECT_CLASSES[(h >> 8) % len(PROJECT_CLASSES)],
        "constructionStatus": CONSTRUCTION_STATUSES[(h >> 12) % len(CONSTRUCTION_STATUSES)],
    }
    unknown = unknown_enum_field(spec, "projects", p)
    if unknown:
        values[unknown] = dict(UNKNOWN_PROJECT_ENUMS)[unknown]
    unknown_references = unknown_reference_fields(spec, p)
    if (h >> 16) % 100 < 80 or unknown_references:  # the region and city codes are Russian
        country = 643
        city, region = _CITY_REGIONS[(h >> 20) % len(_CITY_REGIONS)]
        city_id: int | None = None if (h >> 24) % 10 == 0 else city  # some projects name the region only
        region_id: int | None = region
    else:
        country, region_id, city_id = _FOREIGN_COUNTRIES[(h >> 20) % len(_FOREIGN_COUNTRIES)], None, None
    for field in unknown_references:
        if field == "regionId":
            region_id = UNKNOWN_REFERENCE_ID
        else:
            city_id = UNKNOWN_REFERENCE_ID
    hotel = values["type"] in ("ApartHotel", "Hotel")
    payback: str | float | None = None
    if hotel or values["type"] == "Villa":
        years = 50 + (h >> 28) % 100  # tenths of a year
        payback = f"{years // 10}.{years % 10}" if (h >> 36) & 1 else years / 10
    word = _PROJECT_WORDS[(h >> 40) % len(_PROJECT_WORDS)]
    prefix = {"ApartHotel": "Апарт-отель", "Hotel": "Отель", "Villa": "Виллы"}.get(project_type, "ЖК")
    return {
        "id": entity_id(spec, "projects", p),
        "developerId": entity_id(spec, "developers", project_owner(spec, p)),
        "version": _version(spec, h),
        "name": f"{prefix} {word} {p + 1}",
        **values,
        "countryId": country,
        "regionId": region_id,
        "cityId": city_id,
        "stars": 3 + (h >> 44) % 3 if hotel else None,
        "currencyId": 643,
        "paybackYears": payback,
        "deletedAt": _deleted_at(spec, "projects", p, h),
    }


def _building_shape(spec: DatasetSpec, b: int) -> tuple[int, int, int]:
    """(hash, floorsCount, sections) of building `b`."""
    h = _hash(spec, "buildings", b)
    return h, 5 + h % 21, 1 + (h >> 8) % 3


def _building(spec: DatasetSpec, b: int) -> Item:
    h, floors, _ = _building_shape(spec, b)
    return {
        "id": entity_id(spec, "buildings", b),
        "projectId": entity_id(spec, "projects", b // spec.buildings_per_project),
        "version": _version(spec, h),
        "name": f"Корпус {b % spec.buildings_per_project + 1}",
        "floorsCount": floors,
        "deletedAt": _deleted_at(spec, "buildings", b, h),
    }


def _group_rooms(spec: DatasetSpec, g: int) -> int:
    return (g % spec.layout_groups_per_project) % 5


def _layout_group(spec: DatasetSpec, g: int) -> Item:
    h = _hash(spec, "layout-groups", g)
    local = g % spec.layout_groups_per_project
    rooms = _group_rooms(spec, g)
    name = "Студии" if rooms == 0 else f"{rooms}-комнатные"
    return {
        "id": entity_id(spec, "layout-groups", g),
        "projectId": entity_id(spec, "projects", g // spec.layout_groups_per_project),
        "version": _version(spec, h),
        "name": name if local < 5 else f"{name} ({local // 5 + 1})",
        "rooms": rooms,
        "deletedAt": _deleted_at(spec, "layout-groups", g, h),
    }


def _layout_shape(spec: DatasetSpec, lay: int) -> tuple[int, int | None, int, int]:
    """(hash, layout group index or None, rooms, totalArea in hundredths of m²) of layout `lay`."""
    h = _hash(spec, "layouts", lay)
    per_project, groups = spec.layouts_per_project, spec.layout_groups_per_project
    local = lay % per_project
    group = None
    if groups and local % 7 != 6:  # most layouts belong to a group, some do not
        group = (lay // per_project) * groups + local % groups
        rooms = _group_rooms(spec, group)
    else:
        rooms = (h >> 4) % 5
    return h, group, rooms, 2400 + rooms * 1700 + (h >> 8) % 900


def _layout(spec: DatasetSpec, lay: int) -> Item:
    h, group, rooms, area = _layout_shape(spec, lay)
    return {
        "id": entity_id(spec, "layouts", lay),
        "projectId": entity_id(spec, "projects", lay // spec.layouts_per_project),
        "layoutGroupId": None if group is None else entity_id(spec, "layout-groups", group),
        "version": _version(spec, h),
        "name": f"{'Студия' if rooms == 0 else f'{rooms}К'} {_decimal(area)} м²",
        "rooms": rooms,
        "totalArea": _decimal(area),
        "deletedAt": _deleted_at(spec, "layouts", lay, h),
    }


def _object_place(spec: DatasetSpec, o: int) -> tuple[int, int]:
    """(building index, position within the building) of property object `o`."""
    per_project, buildings = spec.objects_per_project, spec.buildings_per_project
    local = o % per_project
    in_project = local * buildings // per_project  # contiguous chunks of the project's objects
    first = -(-in_project * per_project // buildings)
    return (o // per_project) * buildings + in_project, local - first


def _object_number(sections: int, floors: int, k: int) -> tuple[str, int, int]:
    """(number, section, floor) of the k-th object of a building: 4 per section and floor."""
    section = 1 + k % sections
    floor = 1 + (k // (sections * 4)) % floors
    return f"{section}-{floor}-{k + 1}", section, floor


def _property_object(spec: DatasetSpec, o: int) -> Item:
    h = _hash(spec, "property-objects", o)
    building, k = _object_place(spec, o)
    _, floors, sections = _building_shape(spec, building)
    number, section, floor = _object_number(sections, floors, k)
    layouts = spec.layouts_per_project
    layout = None
    area: int | None = None
    if layouts and h % 10 != 0:
        layout = (o // spec.objects_per_project) * layouts + (h >> 4) % layouts
        area = _layout_shape(spec, layout)[3]
    elif (h >> 4) & 1:
        area = 2000 + (h >> 8) % 10000
    roll = (h >> 20) % 100
    status = OBJECT_STATUSES[
        0 if roll < 60 else 1 if roll < 68 else 2 if roll < 75 else 3 if roll < 95 else 4
    ]
    if unknown_enum_field(spec, "property-objects", o):
        status = UNKNOWN_OBJECT_STATUS
    price: int | None = None  # kopecks
    if (h >> 28) % 10 != 0:
        per_m2 = 150_000 + (h >> 32) % 350_000
        price = (area or 4000) * per_m2
    poison = poison_kind(spec, o)
    if poison == "floor":
        floor = 201 + (h >> 40) % 50 if (h >> 48) & 1 else -6 - (h >> 40) % 5
    elif poison == "price":
        price = -abs(price or 100_000)
    elif poison == "duplicate-number":
        number = _object_number(sections, floors, k - 1)[0]
    return {
        "id": entity_id(spec, "property-objects", o),
        "buildingId": entity_id(spec, "buildings", building),
        "layoutId": None if layout is None else entity_id(spec, "layouts", layout),
        "version": _version(spec, h),
        "number": number,
        "floor": floor,
        "section": section,
        "status": status,
        "price": None if price is None else _decimal(price),
        "totalArea": None if area is None else _decimal(area),
        "deletedAt": _deleted_at(spec, "property-objects", o, h),
    }


_BUILDERS = {
    "developers": _developer,
    "projects": _project,
    "buildings": _building,
    "layout-groups": _layout_group,
    "layouts": _layout,
    "property-objects": _property_object,
}

"""The snapshots of the synthetic Talent dataset: each a pure function of (spec, collection,
index) (simulator/indexes.py), nothing stored, so the "1m" preset costs no memory; the knobs that
make some of them poison, deleted or unknown to the contract."""

from __future__ import annotations

from typing import Any, cast

from pin_chessboard_pipelines.store.handbook import CITIES
from pin_chessboard_pipelines.talent.simulator.indexes import collection_prefixes, entity_id
from pin_chessboard_pipelines.talent.simulator.spec import DatasetSpec

Item = dict[str, Any]

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
    return _mix(collection_prefixes(spec.seed)[collection] ^ index)


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


BUILDERS = {
    "developers": _developer,
    "projects": _project,
    "buildings": _building,
    "layout-groups": _layout_group,
    "layouts": _layout,
    "property-objects": _property_object,
}

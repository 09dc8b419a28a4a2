"""Talent snapshot validation and mapping (docs/talent-source.md#snapshots): pure, no database."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pin_chessboard_pipelines.entities import ENTITIES, pin_id
from pin_chessboard_pipelines.errors import SYNC_UNKNOWN_REFERENCE, SYNC_VALIDATION_FAILED
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.store import handbook as reference
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.snapshots import (
    ENUM_FALLBACKS,
    SnapshotError,
    TalentRecord,
    canonical_uuid,
    parse_decimal,
    parse_rfc3339,
    parse_snapshot,
    pin_id_text,
)

HANDBOOK = Handbook(
    countries={r["id"]: r for r in reference.COUNTRIES},
    regions={r["id"]: r for r in reference.REGIONS},
    cities={r["id"]: r for r in reference.CITIES},
    currencies={r["id"]: r for r in reference.CURRENCIES},
)
DEV, PRJ, BLD, GRP, LAY, OBJ = (str(uuid.uuid4()) for _ in range(6))

VALID = {
    "developer": {"id": DEV, "version": 1, "name": "ГК Север", "inn": "7701234567"},
    "project": {
        "id": PRJ,
        "developerId": DEV,
        "version": 2,
        "name": "ЖК",
        "type": "Hotel",
        "class": "Elite",
        "constructionStatus": "Delivered",
        "countryId": 643,
        "regionId": 23,
        "cityId": 3,
        "stars": 5,
        "currencyId": 643,
        "paybackYears": 8.5,
    },
    "building": {"id": BLD, "projectId": PRJ, "version": 1, "name": "Корпус 1", "floorsCount": 9},
    "layoutGroup": {"id": GRP, "projectId": PRJ, "version": 1, "name": "Студии", "rooms": 0},
    "layout": {
        "id": LAY,
        "projectId": PRJ,
        "layoutGroupId": GRP,
        "version": 1,
        "name": "Студия",
        "rooms": 0,
        "totalArea": "24.5",
    },
    "propertyObject": {
        "id": OBJ,
        "buildingId": BLD,
        "layoutId": LAY,
        "version": 1,
        "number": "1-2-3",
        "floor": 2,
        "section": 1,
        "status": "Free",
        "price": "5000000.00",
        "totalArea": 24.5,
    },
}
REQUIRED = {
    "developer": ("id", "version", "name"),
    "project": (
        "id",
        "developerId",
        "version",
        "name",
        "type",
        "class",
        "constructionStatus",
        "countryId",
        "currencyId",
    ),
    "building": ("id", "projectId", "version", "name", "floorsCount"),
    "layoutGroup": ("id", "projectId", "version", "name", "rooms"),
    "layout": ("id", "projectId", "version", "name", "rooms", "totalArea"),
    "propertyObject": ("id", "buildingId", "version", "number", "floor", "status"),
}
OPTIONAL = {
    "developer": ("inn", "deletedAt"),
    "project": ("regionId", "cityId", "stars", "paybackYears", "deletedAt"),
    "building": ("deletedAt",),
    "layoutGroup": ("deletedAt",),
    "layout": ("layoutGroupId", "deletedAt"),
    "propertyObject": ("layoutId", "section", "price", "totalArea", "deletedAt"),
}


def parse(entity: str, **changes) -> TalentRecord | SnapshotError:
    raw = {**VALID[entity], **changes}
    return parse_snapshot(entity, {k: v for k, v in raw.items() if v is not ...}, HANDBOOK)


def ok(entity: str, **changes) -> TalentRecord:
    result = parse(entity, **changes)
    assert isinstance(result, TalentRecord), result
    return result


def bad(entity: str, code: str = SYNC_VALIDATION_FAILED, **changes) -> SnapshotError:
    result = parse(entity, **changes)
    assert isinstance(result, SnapshotError), result
    assert result.code == code
    return result


@pytest.mark.parametrize("entity", list(VALID))
def test_valid_snapshot_maps_to_replica_columns(entity):
    record = ok(entity)
    talent_id = VALID[entity]["id"]
    assert record.talent_id == talent_id and record.version == VALID[entity]["version"]
    assert record.columns["id"] == str(pin_id(entity, talent_id)) == record.pin_id
    assert record.columns["external_talent_id"] == talent_id
    assert record.columns["replica_version"] == record.version
    assert record.columns["deleted_at"] is None
    assert record.unknown_enums == () and record.unresolved_references == ()


def test_project_columns_and_parent_pins():
    record = ok("project")
    developer_pin = str(pin_id("developer", DEV))
    assert record.parents == {"developer": DEV}
    assert {k: v for k, v in record.columns.items() if k not in ("id", "external_talent_id")} == {
        "replica_version": 2,
        "deleted_at": None,
        "name": "ЖК",
        "type": "Hotel",
        "class": "Elite",
        "construction_status": "Delivered",
        "country_id": 643,
        "region_id": 23,
        "city_id": 3,
        "stars": 5,
        "currency_id": 643,
        "payback_years": Decimal("8.5"),
        "developer_id": developer_pin,
        "tenant_id": developer_pin,
    }


def test_child_parent_links():
    layout = ok("layout")
    assert layout.parents == {"project": PRJ, "layoutGroup": GRP}
    assert layout.columns["project_id"] == str(pin_id("project", PRJ))
    assert layout.columns["layout_group_id"] == str(pin_id("layoutGroup", GRP))
    assert ok("layout", layoutGroupId=None).columns["layout_group_id"] is None
    assert ok("layout", layoutGroupId=None).parents == {"project": PRJ}
    obj = ok("propertyObject")
    assert obj.parents == {"building": BLD, "layout": LAY}
    assert obj.columns["building_id"] == str(pin_id("building", BLD))
    assert obj.columns["layout_id"] == str(pin_id("layout", LAY))
    assert "project_id" not in obj.columns and "tenant_id" not in obj.columns  # from the building row
    assert ok("building").columns["project_id"] == str(pin_id("project", PRJ))
    assert ok("layoutGroup").columns["project_id"] == str(pin_id("project", PRJ))


@pytest.mark.parametrize(("entity", "name"), [(e, n) for e, names in REQUIRED.items() for n in names])
def test_missing_required_field_is_poison(entity, name):
    for value in (..., None):
        error = bad(entity, **{name: value})
        assert name in error.message and "missing" in error.message


@pytest.mark.parametrize(("entity", "name"), [(e, n) for e, names in OPTIONAL.items() for n in names])
def test_optional_field_may_be_absent_or_null(entity, name):
    assert isinstance(parse(entity, **{name: ...}), TalentRecord)
    assert isinstance(parse(entity, **{name: None}), TalentRecord)


def test_unknown_extra_fields_are_ignored():
    record = ok("propertyObject", color="blue", nested={"a": [1, 2]}, projectId=str(uuid.uuid4()))
    assert record.columns == ok("propertyObject").columns


def test_external_id_is_reported_even_when_invalid():
    assert bad("developer", id="nope").external_id == "nope"
    assert bad("developer", name="").external_id == DEV
    assert bad("developer", id=...).external_id is None
    assert parse_snapshot("developer", ["not", "an", "object"], HANDBOOK).external_id is None


def test_ids_must_be_uuid_strings():
    bad("building", projectId="123")
    bad("building", projectId=123)
    bad("propertyObject", layoutId="x")
    upper = VALID["developer"]["id"].upper()
    assert ok("developer", id=upper).talent_id == DEV
    assert ok("developer", id=upper).pin_id == str(pin_id("developer", DEV))
    for other_form in ("{" + DEV + "}", DEV.replace("-", ""), "urn:uuid:" + DEV):
        assert ok("developer", id=other_form).talent_id == DEV


def test_pin_id_text_is_replica_ids_pin_id():
    for entity in VALID:
        for _ in range(200):
            talent_id = str(uuid.uuid4())
            assert pin_id_text(entity, talent_id) == str(pin_id(entity, talent_id))
    assert canonical_uuid(DEV.upper()) == DEV
    with pytest.raises(ValueError):
        canonical_uuid("0" * 35)


@pytest.mark.parametrize(
    ("entity", "name", "inside", "outside"),
    [
        ("developer", "version", [1, 2**63 - 1], [0, -1, 2**63]),
        ("building", "floorsCount", [1, 200], [0, 201]),
        ("layoutGroup", "rooms", [0, 10], [-1, 11]),
        ("layout", "rooms", [0, 10], [-1, 11]),
        ("propertyObject", "floor", [-5, 0, 200], [-6, 201]),
        ("propertyObject", "section", [1, 100], [0, 101]),
        ("project", "stars", [1, 5], [0, 6]),
        ("project", "countryId", [643], [2**15, -(2**15) - 1]),
        ("project", "currencyId", [643], [2**15]),
        ("project", "regionId", [77, 2**63 - 1], [2**63]),
        ("project", "cityId", [1], [-(2**63) - 1]),
    ],
)
def test_integer_ranges(entity, name, inside, outside):
    for value in inside:
        assert isinstance(parse(entity, **{name: value}), TalentRecord), value
    for value in outside:
        assert "outside" in bad(entity, **{name: value}).message, value


@pytest.mark.parametrize("value", [True, 1.0, "1", [1]])
def test_integers_must_be_json_integers(value):
    bad("building", floorsCount=value)
    bad("developer", version=value)


@pytest.mark.parametrize(
    ("entity", "name", "inside", "outside"),
    [
        (
            "propertyObject",
            "price",
            ["0", 0, "1000000000000", 10**12, "0.01"],
            ["-0.01", -1, "1000000000000.01"],
        ),
        ("propertyObject", "totalArea", ["0.01", 10000, "10000.00"], [0, "0", "-1", "10000.01"]),
        ("layout", "totalArea", ["0.5", 10000], [0, "10000.001"]),
        ("project", "paybackYears", ["0.1", 100, 1.5], [0, "-1", "0.0"]),
    ],
)
def test_decimal_ranges(entity, name, inside, outside):
    for value in inside:
        assert isinstance(parse(entity, **{name: value}), TalentRecord), value
    for value in outside:
        assert bad(entity, **{name: value}).message.startswith(f"{entity} {name}:"), value


def test_decimals_as_numbers_and_strings():
    column = {"price": "price", "totalArea": "total_area"}
    assert ok("propertyObject", price="5000000.50").columns["price"] == Decimal("5000000.50")
    assert ok("propertyObject", price=5000000.5).columns["price"] == Decimal("5000000.5")
    assert ok("propertyObject", price=5000000).columns["price"] == Decimal(5000000)
    assert ok("propertyObject", price=" 12.5 ").columns["price"] == Decimal("12.5")
    assert ok("propertyObject", totalArea="1e2").columns[column["totalArea"]] == Decimal(100)
    assert ok("propertyObject", totalArea=0.1).columns["total_area"] == Decimal(
        "0.1"
    )  # not 0.1000000000000000055
    for junk in (
        "abc",
        "",
        "NaN",
        "Infinity",
        "1_000",
        "1,5",
        "0x10",
        "١٢٣",
        True,
        [1],
        float("nan"),
        float("inf"),
    ):
        bad("propertyObject", price=junk)
    bad("propertyObject", totalArea="0." + "0" * 40 + "1")  # more fractional digits than any area has


def test_parse_decimal_and_rfc3339_helpers():
    assert parse_decimal("-1.25e1") == Decimal("-12.5")
    assert parse_decimal(3) == Decimal(3)
    assert parse_decimal(Decimal("2.50")) == Decimal("2.50")
    with pytest.raises(ValueError):
        parse_decimal(Decimal("NaN"))
    with pytest.raises(ValueError):
        parse_decimal(None)
    assert parse_rfc3339("2024-02-29T23:59:59.123456789Z") == datetime(
        2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC
    )
    assert parse_rfc3339("2024-01-01t00:00:00z") == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_rfc3339("2024-01-01 03:00:00+03:00") == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_rfc3339("2024-01-01T00:00:00-05:30").utcoffset() == -timedelta(hours=5, minutes=30)
    for junk in (
        "2024-01-01",
        "2024-01-01T00:00:00",
        "2024-02-30T00:00:00Z",
        "yesterday",
        "٢٠٢٤-01-01T00:00:00Z",
        "2024-01-01T25:00:00Z",
    ):
        with pytest.raises(ValueError):
            parse_rfc3339(junk)


def test_deleted_at_is_an_aware_datetime():
    record = ok("building", deletedAt="2024-03-01T12:00:00+03:00")
    assert record.columns["deleted_at"] == datetime(2024, 3, 1, 12, tzinfo=timezone(timedelta(hours=3)))
    assert record.columns["deleted_at"].tzinfo is not None
    bad("building", deletedAt="2024-03-01")
    bad("building", deletedAt=1709290800)


@pytest.mark.parametrize(
    ("entity", "name", "limit"),
    [("developer", "name", 256), ("project", "name", 256), ("propertyObject", "number", 32)],
)
def test_string_lengths(entity, name, limit):
    assert isinstance(parse(entity, **{name: "я" * limit}), TalentRecord)
    assert isinstance(parse(entity, **{name: "x"}), TalentRecord)
    bad(entity, **{name: "я" * (limit + 1)})
    bad(entity, **{name: ""})
    bad(entity, **{name: 5})


def test_strings_postgresql_cannot_store_are_poison():
    assert "NUL" in bad("developer", name="a\x00b").message
    bad("propertyObject", number="\ud800")


def test_inn_is_10_or_12_digits():
    assert ok("developer", inn="123456789012").columns["inn"] == "123456789012"
    for junk in ("123456789", "12345678901", "1234567890123", "12345abcde", 1234567890, "١٢٣٤٥٦٧٨٩٠"):
        bad("developer", inn=junk)


@pytest.mark.parametrize(
    ("entity", "name", "enum"),
    [
        ("project", "type", "project.type"),
        ("project", "class", "project.class"),
        ("project", "constructionStatus", "project.constructionStatus"),
        ("propertyObject", "status", "propertyObject.status"),
    ],
)
def test_unknown_enum_takes_the_fallback_and_is_reported(entity, name, enum):
    values, fallback = ENUM_FALLBACKS[enum]
    column = {"constructionStatus": "construction_status"}.get(name, name)
    for value in sorted(values):
        assert ok(entity, **{name: value}).columns[column] == value
    record = ok(entity, **{name: "Frozen"})
    assert record.columns[column] == fallback
    assert record.unknown_enums == ((enum, "Frozen"),)
    assert ok(entity, **{name: "free"}).columns[column] == fallback  # case matters
    bad(entity, **{name: 3})


def test_enum_fallbacks_are_the_contract_ones():
    assert {k: v[1] for k, v in ENUM_FALLBACKS.items()} == {
        "project.type": "ResidentialComplex",
        "project.class": "Comfort",
        "project.constructionStatus": "UnderConstruction",
        "propertyObject.status": "Hidden",
    }


def test_region_and_city_resolve_independently():
    record = ok("project", regionId=999, cityId=1)
    assert (record.columns["region_id"], record.columns["city_id"]) == (None, 1)
    assert record.unresolved_references == ("regionId",)
    record = ok("project", regionId=77, cityId=999)
    assert (record.columns["region_id"], record.columns["city_id"]) == (77, None)
    assert record.unresolved_references == ("cityId",)
    record = ok("project", regionId=998, cityId=999)
    assert (record.columns["region_id"], record.columns["city_id"]) == (None, None)
    assert record.unresolved_references == ("regionId", "cityId")
    record = ok("project", regionId=16, cityId=1)  # a city of another region is still resolved
    assert (record.columns["region_id"], record.columns["city_id"]) == (16, 1)


def test_unknown_country_or_currency_is_poison():
    assert "countryId" in bad("project", SYNC_UNKNOWN_REFERENCE, countryId=4).message
    assert "currencyId" in bad("project", SYNC_UNKNOWN_REFERENCE, currencyId=999).message
    # a broken field is reported before an unknown reference
    bad("project", SYNC_VALIDATION_FAILED, countryId=4, name="")


def test_unknown_entity_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown Talent entity"):
        parse_snapshot("flat", {}, HANDBOOK)


def test_every_simulator_snapshot_parses():
    """The bundled simulator follows the same contract: its clean dataset has no poison."""
    spec = DatasetSpec.preset("demo")
    for stage in ENTITIES:
        for raw in dataset.iter_items(spec, stage.collection):
            assert isinstance(parse_snapshot(stage.name, raw, HANDBOOK), TalentRecord), raw


def test_simulator_poison_is_detected():
    spec = DatasetSpec(
        objects_per_project=30, poison_every=5, unknown_enum_every=4, unknown_reference_every=1
    )
    errors = [
        parse_snapshot("propertyObject", raw, HANDBOOK)
        for raw in dataset.iter_items(spec, "property-objects")
        if dataset.poison_kind(spec, dataset.index_of(spec, "property-objects", raw["id"]))
        in ("floor", "price")
    ]
    assert errors and all(isinstance(e, SnapshotError) for e in errors)
    projects = [parse_snapshot("project", raw, HANDBOOK) for raw in dataset.iter_items(spec, "projects")]
    assert all(isinstance(p, TalentRecord) and p.unresolved_references for p in projects)


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
)
FIELD_NAMES = sorted({name for names in (*REQUIRED.values(), *OPTIONAL.values()) for name in names})


@settings(max_examples=300, deadline=None)
@given(
    entity=st.sampled_from(list(VALID)),
    changes=st.dictionaries(st.sampled_from(FIELD_NAMES), JSON_VALUES | st.just(...), max_size=4),
)
def test_any_json_is_a_record_or_a_snapshot_error(entity, changes):
    """Poison never raises: whatever JSON arrives, the item maps or is quarantined with a code."""
    result = parse(entity, **changes)
    assert isinstance(result, TalentRecord | SnapshotError)
    if isinstance(result, SnapshotError):
        assert result.code in (SYNC_VALIDATION_FAILED, SYNC_UNKNOWN_REFERENCE) and result.message
    else:
        assert result.columns["replica_version"] >= 1

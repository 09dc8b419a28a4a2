"""The frozen JSON shape of every pin.chessboard event (docs/events.md#payloads).

A change of a field name, a removed field or a changed JSON type fails here: that is a breaking
change of ContractVersion 1 (docs/events.md#versioning).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pin_chessboard_pipelines.events import payloads as p
from pin_chessboard_pipelines.events.messages import (
    batch_headers,
    held_back,
    kafka_headers,
    message_value,
    message_values,
    row_headers,
)
from pin_chessboard_pipelines.events.outbox import HEADER_NAMES, OutboxEvent, payload_bytes
from pin_chessboard_pipelines.events.topics_admin import contract_topics
from pin_chessboard_pipelines.store import handbook as hb

# JSON types: "string", "integer", "number" (integer or fraction), "null", or a nested shape (dict).
UUID_ = "uuid"
STRING = "string"
INTEGER = "integer"
NUMBER = "number"
NULL = "null"
RANGE = {"min": {NUMBER}, "max": {NUMBER}}

COUNTRY_SNAPSHOT = {"id": {INTEGER}, "name": {STRING}, "isoCode": {STRING}}
REGION_SNAPSHOT = {"id": {INTEGER}, "name": {STRING}}
CITY_SNAPSHOT = {"id": {INTEGER}, "name": {STRING}}
CURRENCY_SNAPSHOT = {"id": {INTEGER}, "isoCode": {STRING}, "name": {STRING}, "sign": {STRING}}

PROJECT_UPSERTED = {
    "id": {UUID_},
    "tenantId": {UUID_},
    "developerId": {UUID_},
    "status": {STRING},
    "name": {STRING},
    "type": {STRING},
    "class": {STRING},
    "constructionStatus": {STRING},
    "countryId": {INTEGER},
    "countrySnapshot": {"shape": COUNTRY_SNAPSHOT},
    "regionId": {INTEGER, NULL},
    "regionSnapshot": {"shape": REGION_SNAPSHOT, NULL: True},
    "cityId": {INTEGER, NULL},
    "citySnapshot": {"shape": CITY_SNAPSHOT, NULL: True},
    "stars": {INTEGER, NULL},
    "hotelierId": {UUID_, NULL},
    "price": {"shape": RANGE, NULL: True},
    "currencyId": {INTEGER},
    "currencySnapshot": {"shape": CURRENCY_SNAPSHOT},
    "propertyObjectsTotalCount": {INTEGER},
    "propertyObjectsFreeCount": {INTEGER},
    "paybackYears": {NUMBER, NULL},
    "coverImageFileId": {UUID_, NULL},
    "version": {INTEGER},
}

DEVELOPER_UPSERTED = {
    "id": {UUID_},
    "name": {STRING},
    "inn": {STRING, NULL},
    "status": {STRING},
    "deletedAt": {STRING, NULL},
    "version": {INTEGER},
}

BUILDING_UPSERTED = {
    "id": {UUID_},
    "tenantId": {UUID_},
    "projectId": {UUID_},
    "status": {STRING},
    "name": {STRING},
    "floorsCount": {INTEGER},
    "deletedAt": {STRING, NULL},
    "version": {INTEGER},
}

LAYOUT_GROUP_UPSERTED = {
    "id": {UUID_},
    "tenantId": {UUID_},
    "projectId": {UUID_},
    "name": {STRING},
    "rooms": {INTEGER},
    "layoutsCount": {INTEGER},
    "area": {"shape": RANGE, NULL: True},
    "deletedAt": {STRING, NULL},
    "version": {INTEGER},
}

LAYOUT_UPSERTED = {
    "id": {UUID_},
    "tenantId": {UUID_},
    "projectId": {UUID_},
    "layoutGroupId": {UUID_, NULL},
    "name": {STRING},
    "rooms": {INTEGER},
    "totalArea": {NUMBER},
    "propertyObjectsCount": {INTEGER},
    "deletedAt": {STRING, NULL},
    "version": {INTEGER},
}

PROPERTY_OBJECT_UPSERTED = {
    "id": {UUID_},
    "tenantId": {UUID_},
    "projectId": {UUID_},
    "buildingId": {UUID_},
    "layoutId": {UUID_, NULL},
    "number": {STRING},
    "floor": {INTEGER},
    "section": {INTEGER, NULL},
    "status": {STRING},
    "statusSource": {STRING},
    "price": {NUMBER, NULL},
    "totalArea": {NUMBER, NULL},
    "deletedAt": {STRING, NULL},
    "version": {INTEGER},
}

PRICE_CHANGED = {
    "id": {UUID_},
    "projectId": {UUID_},
    "oldPrice": {NUMBER, NULL},
    "newPrice": {NUMBER, NULL},
    "source": {STRING},
    "version": {INTEGER},
}

STATUS_CHANGED = {
    "id": {UUID_},
    "projectId": {UUID_},
    "oldStatus": {STRING, NULL},
    "newStatus": {STRING},
    "source": {STRING},
    "version": {INTEGER},
}


def _json_type(value: Any) -> str:
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return INTEGER
    if isinstance(value, float):
        return "fraction"
    if isinstance(value, str):
        try:
            uuid.UUID(value)
            return UUID_
        except ValueError:
            return STRING
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def assert_shape(payload: dict[str, Any], shape: dict[str, Any], where: str = "") -> None:
    """`payload`, as a consumer parses it from JSON, has exactly the fields and types of `shape`."""
    assert list(payload) == list(shape), f"{where}: fields {list(payload)} != {list(shape)}"
    for name, allowed in shape.items():
        value = payload[name]
        kind = _json_type(value)
        if isinstance(allowed, dict):  # nested object, optionally null
            if value is None:
                assert allowed.get(NULL), f"{where}.{name} must not be null"
                continue
            assert kind == "object", f"{where}.{name} must be an object, got {value!r}"
            assert_shape(value, allowed["shape"], f"{where}.{name}")
            continue
        ok = (
            kind in allowed
            or (kind == UUID_ and STRING in allowed)
            or (kind in (INTEGER, "fraction") and NUMBER in allowed)
        )
        assert ok, f"{where}.{name} = {value!r} ({kind}) is not {sorted(allowed)}"


HANDBOOK = p.Handbook(
    countries={c["id"]: c for c in hb.COUNTRIES},
    regions={r["id"]: r for r in hb.REGIONS},
    cities={c["id"]: c for c in hb.CITIES},
    currencies={c["id"]: c for c in hb.CURRENCIES},
)
WHEN = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def _id() -> uuid.UUID:
    return uuid.uuid4()


def project_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": _id(),
        "tenant_id": _id(),
        "developer_id": _id(),
        "status": "Draft",
        "name": "ЖК Северный",
        "type": "ResidentialComplex",
        "class": "Comfort",
        "construction_status": "UnderConstruction",
        "country_id": 643,
        "region_id": 77,
        "city_id": 1,
        "stars": None,
        "hotelier_id": None,
        "currency_id": 643,
        "payback_years": Decimal("7.5"),
        "cover_image_file_id": None,
        "price_min": Decimal("5000000.00"),
        "price_max": Decimal("12500000.50"),
        "property_objects_total_count": 10,
        "property_objects_free_count": 4,
        "version": 3,
        "deleted_at": None,
    }
    row.update(overrides)
    return row


def roundtrip(payload: dict[str, Any]) -> dict[str, Any]:
    """What a consumer sees: the relay's bytes parsed back."""
    return json.loads(payload_bytes(payload))


# -- project-upserted (docs/events.md#project-upserted) ------------------------------------------------------


def test_project_upserted_has_exactly_the_24_fields_of_seed_003():
    payload = roundtrip(p.project_upserted(project_row(), HANDBOOK))
    assert len(payload) == 24
    assert_shape(payload, PROJECT_UPSERTED, "project-upserted")
    assert payload["price"] == {"min": 5000000, "max": 12500000.5}
    assert payload["countrySnapshot"] == {"id": 643, "name": "Россия", "isoCode": "RUS"}
    assert payload["regionSnapshot"] == {"id": 77, "name": "Москва"}
    assert payload["citySnapshot"] == {"id": 1, "name": "Москва"}
    assert payload["currencySnapshot"] == {
        "id": 643,
        "isoCode": "RUB",
        "name": "Российский рубль",
        "sign": "₽",
    }


def test_project_upserted_without_prices_and_references():
    row = project_row(
        region_id=None,
        city_id=None,
        price_min=None,
        price_max=None,
        payback_years=None,
        property_objects_total_count=0,
        property_objects_free_count=0,
        stars=4,
        hotelier_id=_id(),
        cover_image_file_id=_id(),
        type="Hotel",
    )
    payload = roundtrip(p.project_upserted(row, HANDBOOK))
    assert_shape(payload, PROJECT_UPSERTED, "project-upserted")
    assert payload["price"] is None
    assert payload["regionSnapshot"] is None and payload["citySnapshot"] is None
    assert payload["stars"] == 4 and payload["hotelierId"] == str(row["hotelier_id"])


MONEY = st.decimals(min_value=0, max_value=10**12, places=2, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    region_id=st.sampled_from([None] + [r["id"] for r in hb.REGIONS]),
    city_id=st.sampled_from([None] + [c["id"] for c in hb.CITIES]),
    prices=st.one_of(st.none(), st.tuples(MONEY, MONEY)),
    payback=st.one_of(st.none(), st.decimals(min_value="0.1", max_value=100, places=1)),
    counts=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)),
    version=st.integers(1, 2**53),
)
def test_project_upserted_shape_holds_for_every_stored_row(
    region_id, city_id, prices, payback, counts, version
):
    low, high = sorted(prices) if prices else (None, None)
    total, free = max(counts), min(counts)
    row = project_row(
        region_id=region_id,
        city_id=city_id,
        price_min=low,
        price_max=high,
        payback_years=payback,
        property_objects_total_count=total,
        property_objects_free_count=free,
        version=version,
    )
    payload = roundtrip(p.project_upserted(row, HANDBOOK))
    assert_shape(payload, PROJECT_UPSERTED, "project-upserted")
    # a display snapshot is present exactly when its id is (stored ids are resolved or NULL)
    assert (payload["regionSnapshot"] is None) == (payload["regionId"] is None)
    assert (payload["citySnapshot"] is None) == (payload["cityId"] is None)
    # price is {min, max} or null, min <= max, and the JSON number is the exact numeric value
    if low is None:
        assert payload["price"] is None
    else:
        assert Decimal(str(payload["price"]["min"])) == low
        assert Decimal(str(payload["price"]["max"])) == high
        assert payload["price"]["min"] <= payload["price"]["max"]
    assert payload["version"] == version


# -- every other event ------------------------------------------------------------------------


def developer_row(**overrides: Any) -> dict[str, Any]:
    return {
        "id": _id(),
        "name": "ГК Север 1",
        "inn": "7701234567",
        "status": "Draft",
        "deleted_at": None,
        "version": 1,
    } | overrides


def building_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": _id(),
        "tenant_id": _id(),
        "project_id": _id(),
        "status": "Draft",
        "name": "Корпус 1",
        "floors_count": 25,
        "property_objects_total_count": 100,
        "property_objects_free_count": 40,
        "deleted_at": None,
        "version": 2,
    }
    return row | overrides


def layout_group_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": _id(),
        "tenant_id": _id(),
        "project_id": _id(),
        "name": "Однокомнатные",
        "rooms": 1,
        "layouts_count": 3,
        "area_min": Decimal("35.20"),
        "area_max": Decimal("48"),
        "deleted_at": None,
        "version": 1,
    }
    return row | overrides


def layout_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": _id(),
        "tenant_id": _id(),
        "project_id": _id(),
        "layout_group_id": _id(),
        "name": "1Е-35",
        "rooms": 0,
        "total_area": Decimal("35.20"),
        "property_objects_count": 7,
        "deleted_at": None,
        "version": 1,
    }
    return row | overrides


def object_row(**overrides: Any) -> dict[str, Any]:
    row = {
        "id": _id(),
        "tenant_id": _id(),
        "project_id": _id(),
        "building_id": _id(),
        "layout_id": _id(),
        "number": "101",
        "floor": -1,
        "section": 2,
        "status": "Free",
        "status_source": "TalentSync",
        "price": Decimal("7450000.00"),
        "total_area": Decimal("42.7"),
        "deleted_at": None,
        "version": 1,
    }
    return row | overrides


CASES = [
    ("developer", lambda: p.developer_upserted(developer_row()), DEVELOPER_UPSERTED),
    (
        "developer deleted",
        lambda: p.developer_upserted(developer_row(inn=None, deleted_at=WHEN)),
        DEVELOPER_UPSERTED,
    ),
    ("building", lambda: p.building_upserted(building_row()), BUILDING_UPSERTED),
    ("building deleted", lambda: p.building_upserted(building_row(deleted_at=WHEN)), BUILDING_UPSERTED),
    ("layout group", lambda: p.layout_group_upserted(layout_group_row()), LAYOUT_GROUP_UPSERTED),
    (
        "layout group empty",
        lambda: p.layout_group_upserted(layout_group_row(layouts_count=0, area_min=None, area_max=None)),
        LAYOUT_GROUP_UPSERTED,
    ),
    ("layout", lambda: p.layout_upserted(layout_row()), LAYOUT_UPSERTED),
    ("layout without group", lambda: p.layout_upserted(layout_row(layout_group_id=None)), LAYOUT_UPSERTED),
    ("property object", lambda: p.property_object_upserted(object_row()), PROPERTY_OBJECT_UPSERTED),
    (
        "property object bare",
        lambda: p.property_object_upserted(
            object_row(
                layout_id=None, section=None, price=None, total_area=None, status="Hidden", deleted_at=WHEN
            )
        ),
        PROPERTY_OBJECT_UPSERTED,
    ),
    (
        "price changed",
        lambda: p.property_object_price_changed(object_row(), Decimal("7000000")),
        PRICE_CHANGED,
    ),
    ("initial price point", lambda: p.property_object_price_changed(object_row(), None), PRICE_CHANGED),
    (
        "status changed",
        lambda: p.property_object_status_changed(object_row(status="Sold"), "Free"),
        STATUS_CHANGED,
    ),
    (
        "imported as sold",
        lambda: p.property_object_status_changed(object_row(status="Sold"), None),
        STATUS_CHANGED,
    ),
]


@pytest.mark.parametrize(("name", "build", "shape"), CASES, ids=[c[0] for c in CASES])
def test_every_event_has_its_frozen_shape(name, build, shape):
    assert_shape(roundtrip(build()), shape, name)


def test_building_payload_leaves_out_the_object_counters():
    payload = p.building_upserted(building_row())
    assert not any("Count" in name and name != "floorsCount" for name in payload)


def test_layout_group_area_is_a_range():
    payload = roundtrip(p.layout_group_upserted(layout_group_row()))
    assert payload["area"] == {"min": 35.2, "max": 48}


def test_change_events_carry_old_and_new_values_and_source():
    row = object_row(price=Decimal("8100000.50"), status="Sold", version=5)
    price = roundtrip(p.property_object_price_changed(row, Decimal("7000000")))
    assert (price["oldPrice"], price["newPrice"], price["source"], price["version"]) == (
        7000000,
        8100000.5,
        "TalentSync",
        5,
    )
    status = roundtrip(p.property_object_status_changed(row, "Booked", source="Crm"))
    assert (status["oldStatus"], status["newStatus"], status["source"]) == ("Booked", "Sold", "Crm")


# -- topics, headers, serialization -------------------------------------------------------------


def test_topics_and_partitions_are_the_contracts():
    assert contract_topics() == {
        "pin.chessboard.developer-upserted.v1": 3,
        "pin.chessboard.project-upserted.v1": 3,
        "pin.chessboard.building-upserted.v1": 3,
        "pin.chessboard.layout-group-upserted.v1": 3,
        "pin.chessboard.layout-upserted.v1": 3,
        "pin.chessboard.property-object-upserted.v1": 6,
        "pin.chessboard.property-object-price-changed.v1": 6,
        "pin.chessboard.property-object-status-changed.v1": 6,
    }


def test_outbox_row_carries_key_topic_and_the_seven_contract_headers():
    aggregate = str(_id())
    event = OutboxEvent(
        p.PROJECT_UPSERTED, aggregate, {"id": aggregate, "version": 1}, correlation_id="corr-1"
    )
    row = event.row()
    assert row["topic"] == "pin.chessboard.project-upserted.v1"
    assert row["message_key"] == aggregate
    assert list(row["headers"]) == list(HEADER_NAMES)
    assert row["headers"] == {
        "messageId": str(event.message_id),
        "occurredAt": event.occurred_at.isoformat(),
        "aggregateId": aggregate,
        "aggregateType": "Project",
        "eventType": "pin.chessboard.project-upserted",
        "contractVersion": "1",
        "correlationId": "corr-1",
    }
    # Kafka headers: bytes, contract order first, whatever order jsonb returned them in
    shuffled = dict(reversed(list(row["headers"].items())))
    assert kafka_headers(json.dumps(shuffled)) == [(k, v.encode()) for k, v in row["headers"].items()]


def test_payload_bytes_are_compact_utf8_json():
    payload = {"name": "ЖК «Северный»", "price": 1.5, "none": None}
    raw = payload_bytes(payload)
    assert raw == '{"name":"ЖК «Северный»","price":1.5,"none":null}'.encode()


def test_failed_delivery_holds_back_later_rows_of_the_same_key_only():
    rows = [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "b"), (6, "a")]
    assert held_back(rows, failed_ids={3}) == {3, 6}
    assert held_back(rows, failed_ids={2, 4}) == {2, 4, 5}
    assert held_back(rows, failed_ids=set()) == set()


# JSON values as jsonb prints them: `, ` and `: ` between tokens, UTF-8 text, escapes in strings.
_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.decimals(allow_nan=False, allow_infinity=False, places=5).map(lambda d: json.loads(str(d)))
    | st.text(alphabet=st.sampled_from(["a", "Ж", ",", ":", " ", '"', "\\", "\n", "{", "]"]), max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_json_values, max_size=6))
def test_message_values_of_a_batch_are_each_rows_message_value(values):
    texts = [json.dumps(value, ensure_ascii=False) for value in values]
    assert message_values(texts) == [message_value(text) for text in texts]
    assert [json.loads(raw) for raw in message_values(texts)] == values


def test_message_values_keep_every_digit_and_string_as_stored():
    texts = [
        '{"price": {"min": 987654321098.76543, "max": 0.0000001}, "area": 42.50, "n": 123456789012345678901234567890}',
        '{"name": "Корпус «А», секция 1: west", "tags": ["a, b", "c"], "none": null, "ok": true}',
        '{"q": "say \\"hi\\", then: go"}',
        "{}",
    ]
    assert message_values(texts) == [
        b'{"price":{"min":987654321098.76543,"max":0.0000001},"area":42.50,"n":123456789012345678901234567890}',
        '{"name":"Корпус «А», секция 1: west","tags":["a, b","c"],"none":null,"ok":true}'.encode(),
        b'{"q":"say \\"hi\\", then: go"}',
        b"{}",
    ]
    assert message_values([]) == []


def test_batch_headers_are_the_rows_headers():
    contract = [
        "m-1",
        "2026-01-01T00:00:00+00:00",
        "k",
        "Project",
        "pin.chessboard.project-upserted",
        "1",
        "c",
    ]
    rows = [
        (1, "t", "k", "{}", *contract, None, None),
        (2, "t", "k", "{}", *contract[:6], None, None, None),  # no correlationId
        (3, "t", "k", "{}", *contract, '{"x-extra": "1"}', "00-abc-def-01"),
    ]
    encoded = [
        [(name, v if isinstance(v, bytes) else v.encode()) for name, v in h] for h in batch_headers(rows)
    ]
    assert encoded == [row_headers(row) for row in rows]
    assert [name for name, _ in encoded[0]] == list(HEADER_NAMES)

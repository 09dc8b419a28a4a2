"""The JSON Schemas of the pin.chessboard.* events (pin_chessboard_pipelines/events/schemas) and the
rule that a `.v1` schema only grows (events/schema_compat.py, docs/events.md#versioning)."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from pin_chessboard_pipelines.events import contracts
from pin_chessboard_pipelines.events import payloads as p
from pin_chessboard_pipelines.events.dead_letters import dead_letter_headers
from pin_chessboard_pipelines.events.outbox import OutboxEvent, payload_bytes
from pin_chessboard_pipelines.events.schema_compat import breaking_changes
from pin_chessboard_pipelines.runtime.embedded import BROKER_SCHEMAS
from tests.support.contracts import header_errors, payload_errors
from tests.unit.test_event_contracts import HANDBOOK, project_row

RECORDED = Path(__file__).parent.parent / "snapshots" / "event_schemas"
PROJECT_TOPIC = p.topic_of(p.PROJECT_UPSERTED)


def _as_consumer_reads(payload: dict[str, Any]) -> dict[str, Any]:
    """The relay's bytes parsed back with exact decimals, as docs/events.md asks of a consumer."""
    return json.loads(payload_bytes(payload), parse_float=Decimal)


def _schema_files() -> list[Path]:
    return sorted(contracts.SCHEMA_DIR.glob("*.json"))


# -- the schemas ---------------------------------------------------------------------------------


def test_every_topic_of_the_contract_has_a_draft_2020_12_schema():
    assert sorted(contracts.v1_schema_files()) == sorted(p.topic_of(e) for e in p.EVENT_TYPES)
    assert len(contracts.v1_schema_files()) == 8
    for path in _schema_files():
        schema = json.loads(path.read_text())
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", path.name
        Draft202012Validator.check_schema(schema)
    for topic, path in contracts.v1_schema_files().items():
        assert path.exists(), topic
        assert contracts.schema_of(topic) == json.loads(path.read_text())


def test_project_upserted_schema_requires_exactly_the_24_fields():
    schema = contracts.schema_of(PROJECT_TOPIC)
    assert len(schema["properties"]) == 24 and schema["required"] == list(schema["properties"])


def test_a_project_payload_with_exact_decimals_and_null_references_is_valid():
    full = p.project_upserted(project_row(price_min=Decimal("987654321098.76543")), HANDBOOK)
    bare = p.project_upserted(
        project_row(region_id=None, city_id=None, price_min=None, price_max=None, payback_years=None),
        HANDBOOK,
    )
    for payload in (full, bare):
        assert payload_errors(PROJECT_TOPIC, _as_consumer_reads(payload)) == []
    assert _as_consumer_reads(full)["price"]["min"] == Decimal("987654321098.76543")


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"status": "Deleted"}, "status"),  # an enum value the contract does not have
        ({"price": {"min": "5000000.00", "max": 1}}, "price"),  # a decimal as a string
        ({"regionSnapshot": None}, "regionSnapshot"),  # regionId without its snapshot
        ({"regionId": None}, "regionSnapshot"),  # a snapshot without its regionId
        ({"countrySnapshot": None}, "countrySnapshot"),  # never null
        ({"version": 0}, "version"),
        ({"id": "not-a-uuid"}, "id"),
        ({"paybackYears": 0}, "paybackYears"),
        ({"extra": 1}, "extra"),  # the project writes exactly its contract's fields
    ],
)
def test_an_invalid_project_payload_is_refused(change, complaint):
    payload = {**_as_consumer_reads(p.project_upserted(project_row(), HANDBOOK)), **change}
    errors = payload_errors(PROJECT_TOPIC, payload)
    assert errors and complaint in " ".join(errors), errors


def test_a_missing_field_is_refused():
    payload = _as_consumer_reads(p.project_upserted(project_row(), HANDBOOK))
    del payload["price"]
    assert payload_errors(PROJECT_TOPIC, payload) == ["$: 'price' is a required property"]


def test_the_headers_of_an_event_meet_their_schema():
    event = OutboxEvent(p.PROJECT_UPSERTED, "5f0c7a8e-2a44-4e6e-9b43-8f0e4f7f7a11", {}, "corr-1")
    assert header_errors(PROJECT_TOPIC, event.headers()) == []
    assert header_errors(PROJECT_TOPIC + "x", event.headers()) != []  # the topic must match the headers
    assert header_errors(PROJECT_TOPIC, {**event.headers(), "aggregateType": "Flat"}) != []


def test_the_headers_of_a_dead_letter_meet_their_schema():
    class Message:
        def topic(self):
            return "talent.chessboard.developers.v1"

        def partition(self):
            return 2

        def offset(self):
            return 41

        def headers(self):
            return [("traceparent", b"00-ab")]

    at = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    headers = {
        name: value.decode()
        for name, value in dead_letter_headers(Message(), "talent-sync", ValueError("bad\nline"), 6, now=at)
    }
    schema = contracts.load_schema(contracts.DEAD_LETTER_HEADERS_SCHEMA)
    validator = Draft202012Validator(schema)
    assert list(validator.iter_errors(headers)) == []
    assert list(validator.iter_errors({**headers, "pin-dlq-consumer": "other"}))
    assert list(validator.iter_errors({**headers, "pin-dlq-origin-offset": "-1"}))
    missing = dict(headers)
    del missing["pin-dlq-failed-at"]
    assert list(validator.iter_errors(missing))


# -- a .v1 schema only grows --------------------------------------------------------------------


def test_every_schema_has_a_recorded_copy():
    assert sorted(f.name for f in RECORDED.glob("*.json")) == [f.name for f in _schema_files()]


@pytest.mark.parametrize("name", [f.name for f in sorted(RECORDED.glob("*.json"))])
def test_a_schema_changed_since_its_recorded_copy_only_by_additions(name):
    """A breaking change of a published topic's schema needs a new contract version
    (docs/events.md#shipping-a-breaking-change); an additive one is recorded again on release."""
    recorded = json.loads((RECORDED / name).read_text())
    current = json.loads((contracts.SCHEMA_DIR / name).read_text())
    assert breaking_changes(recorded, current) == []


OBJECT = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "status": {"enum": ["Free", "Sold"]},
        "price": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "floor": {"type": "integer", "minimum": 0},
    },
    "required": ["id", "status", "price", "floor"],
}


def _edited(edit) -> dict[str, Any]:
    schema = copy.deepcopy(OBJECT)
    edit(schema)
    return schema


@pytest.mark.parametrize(
    "edit",
    [
        lambda s: s["properties"].update(note={"type": "string"}),  # a new optional field
        lambda s: s["properties"]["status"]["enum"].append("Booked"),  # a new enum value
        lambda s: s["properties"]["id"].update(description="PIN id"),  # an annotation
        lambda s: s.update(title="x", description="y"),
        lambda s: s.update(  # the same type, moved into $defs
            {"$defs": {"floor": {"type": "integer", "minimum": 0}}},
            properties={**s["properties"], "floor": {"$ref": "#/$defs/floor"}},
        ),
    ],
)
def test_additive_changes_are_not_breaking(edit):
    assert breaking_changes(OBJECT, _edited(edit)) == []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda s: s["properties"].pop("floor"), "$.floor: property removed"),
        (lambda s: s["properties"]["id"].update(type="integer"), "$.id: type changed from string to integer"),
        (
            lambda s: s["properties"]["id"].update(type=["string", "null"]),
            "$.id: type changed from string to null|string",
        ),
        (
            lambda s: (s["properties"].update(note={"type": "string"}), s["required"].append("note")),
            "$.note: new required field",
        ),
        (
            lambda s: s["properties"]["status"]["enum"].remove("Sold"),
            "$.status: enum narrowed, removed ['Sold']",
        ),
        (lambda s: s["properties"]["id"].update(enum=["a"]), "$.id: enum added, narrowed to ['a']"),
        (lambda s: s["required"].remove("price"), "$.price: no longer required (may be absent)"),
        (lambda s: s["properties"]["price"].update(anyOf=[{"type": "number"}]), "$.price: anyOf changed"),
        (
            lambda s: s["properties"]["price"]["anyOf"][0].update(type="string"),
            "$.price.anyOf[0]: type changed from number to string",
        ),
        (
            lambda s: s["properties"]["floor"].update(minimum=1),
            "$.floor: minimum changed from 0 to 1",
        ),
        (
            lambda s: s.update(additionalProperties=False),
            "$: additionalProperties changed from None to False",
        ),
    ],
)
def test_a_change_that_is_not_additive_is_named(edit, expected):
    assert breaking_changes(OBJECT, _edited(edit)) == [expected]


def test_a_deliberate_breaking_edit_of_a_v1_schema_fails_the_recorded_copy_check():
    recorded = json.loads((RECORDED / f"{PROJECT_TOPIC}.json").read_text())
    edited = copy.deepcopy(recorded)
    del edited["properties"]["paybackYears"]  # a removed field
    edited["$defs"]["decimal"]["type"] = "string"  # decimals as strings: a changed type everywhere
    edited["properties"]["status"]["enum"].remove("Hidden")  # a narrowed enum
    changes = breaking_changes(recorded, edited)
    assert "$.paybackYears: property removed" in changes
    assert "$.status: enum narrowed, removed ['Hidden']" in changes
    assert "$.price.anyOf[0].min: type changed from number to string" in changes
    with pytest.raises(AssertionError):
        assert breaking_changes(recorded, edited) == []


# -- the broker's copies -----------------------------------------------------------------------


def test_the_brokers_schemas_in_the_package_are_those_of_the_payload_schemas():
    """events/schemas/broker is written by `python -m pin_chessboard_pipelines.events.contracts`."""
    kept = {f.name: f.read_text() for f in contracts.BROKER_SCHEMA_DIR.glob("*.json")}
    assert kept == contracts.broker_schemas()
    assert BROKER_SCHEMAS == contracts.BROKER_SCHEMA_DIR


def test_a_brokers_schema_has_no_reference_and_judges_a_value_as_the_payload_schema_does():
    schema = contracts.broker_schema(contracts.schema_of(PROJECT_TOPIC))
    assert "$ref" not in json.dumps(schema)
    validator = Draft202012Validator(schema)
    good = _as_consumer_reads(p.project_upserted(project_row(), HANDBOOK))
    assert list(validator.iter_errors({"value": good})) == []
    for change in (
        {"status": "Deleted"},
        {"regionSnapshot": None},
        {"id": "x"},
        {"price": {"min": "1", "max": 2}},
    ):
        assert list(validator.iter_errors({"value": {**good, **change}})), change

"""Every event the project writes meets its JSON Schema (pin_chessboard_pipelines/events/schemas).

`assert_outbox_valid` reads every row of a test's outbox and validates its payload against the
schema of its topic and its headers against event.headers.json; the `outbox_contract` fixture
does it at the end of a test (a producer's test module names it in `pytestmark`).
`assert_dead_letter_headers_valid` does the same for a dead letter's headers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from decimal import Decimal
from functools import cache
from typing import Any

import pytest
import sqlalchemy as sa
from jsonschema import Draft202012Validator, FormatChecker

from pin_chessboard_pipelines.events import contracts
from pin_chessboard_pipelines.store.engine import get_engine

# how many of a table's invalid rows an assertion shows
SHOWN = 10


@cache
def _validator_of_file(name: str) -> Draft202012Validator:
    schema = contracts.load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


@cache
def _validator_of_topic(topic: str) -> Draft202012Validator:
    schema = contracts.schema_of(topic)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=FormatChecker())


def payload_errors(topic: str, payload: Mapping[str, Any]) -> list[str]:
    """What is wrong with one event's value: its schema's errors, and any field the schema does not
    name (a consumer ignores one, but the project writes exactly its contract's fields)."""
    try:
        validator = _validator_of_topic(topic)
    except KeyError as error:
        return [str(error)]
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in validator.iter_errors(payload)
    ]
    unnamed = sorted(set(payload) - set(validator.schema["properties"]))
    if unnamed:
        errors.append(f"fields outside the schema: {unnamed}")
    return errors


def header_errors(topic: str, headers: Mapping[str, str]) -> list[str]:
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
        for e in _validator_of_file(contracts.EVENT_HEADERS_SCHEMA).iter_errors(dict(headers))
    ]
    expected = f"{headers.get('eventType')}.v{headers.get('contractVersion')}"
    if topic != expected:
        errors.append(f"topic {topic} != eventType.v<contractVersion> {expected}")
    return errors


def outbox_errors(engine: sa.engine.Engine) -> tuple[int, list[str]]:
    """(rows read, a line per invalid row) for the whole outbox, in id order."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT id, topic, payload::text AS payload, headers::text AS headers "
                "FROM chessboard.outbox_messages ORDER BY id"
            )
        ).all()
    errors = []
    for row in rows:
        payload = json.loads(row.payload, parse_float=Decimal)  # the stored digits, as a consumer should
        problems = payload_errors(row.topic, payload) + header_errors(row.topic, json.loads(row.headers))
        if problems:
            errors.append(f"outbox row {row.id} ({row.topic}): {'; '.join(problems)}")
    return len(rows), errors


def assert_outbox_valid(db_url: str) -> int:
    """Every outbox row of the database meets its schemas; returns how many rows were checked."""
    checked, errors = outbox_errors(get_engine(db_url))
    assert not errors, f"{len(errors)} of {checked} outbox rows break their schema:\n" + "\n".join(
        errors[:SHOWN]
    )
    return checked


def assert_dead_letter_headers_valid(headers: Mapping[str, str]) -> None:
    validator = _validator_of_file(contracts.DEAD_LETTER_HEADERS_SCHEMA)
    errors = [
        f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
        for e in validator.iter_errors(dict(headers))
    ]
    assert not errors, f"dead-letter headers break dead-letter.headers.json: {errors}"


@pytest.fixture
def outbox_contract(db_url: str) -> Iterator[None]:
    """At the end of the test, every outbox row it wrote meets its schemas."""
    yield
    assert_outbox_valid(db_url)

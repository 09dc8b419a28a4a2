"""The reference consumer reads `contractVersion` as seed 003 asks (events/consumer.py): a newer
minor field is ignored, an event of an unknown major version is logged and counted, not applied."""

from __future__ import annotations

import logging
import uuid

from pin_chessboard_pipelines.events import exact_json
from pin_chessboard_pipelines.events import payloads as p
from pin_chessboard_pipelines.events.outbox import OutboxEvent
from pin_chessboard_pipelines.events.reference_consumer import (
    APPLIED,
    UNKNOWN_VERSION,
    ChessboardEvent,
    EventProjection,
)
from tests.unit.test_event_contracts import HANDBOOK, project_row

TOPIC_V1 = p.topic_of(p.PROJECT_UPSERTED)


def event(payload: dict, version: int = 1, topic: str = TOPIC_V1) -> ChessboardEvent:
    outbox = OutboxEvent(p.PROJECT_UPSERTED, payload["id"], payload, "c")
    return ChessboardEvent(topic, 0, 0, payload["id"], outbox.headers(version, str(uuid.uuid4())), payload)


def project(version: int = 1) -> dict:
    return exact_json.loads(exact_json.dumps(p.project_upserted(project_row(version=version), HANDBOOK)))


def test_a_newer_minor_field_is_ignored():
    payload = {**project(), "marketingBadge": "new"}  # a field a later v1 release added
    projection = EventProjection()
    assert projection.apply(event(payload)) == APPLIED
    (state,) = projection.state.values()
    assert "marketingBadge" not in state and state == project_without(payload, "marketingBadge")


def project_without(payload: dict, name: str) -> dict:
    return {k: v for k, v in payload.items() if k != name}


def test_an_unknown_major_version_is_logged_and_counted_not_applied(caplog):
    payload = project()
    projection = EventProjection()
    with caplog.at_level(logging.WARNING, logger="pin_chessboard_pipelines.events.reference_consumer"):
        outcome = projection.apply(event(payload, version=2, topic=p.topic_of(p.PROJECT_UPSERTED, 2)))
    assert outcome == UNKNOWN_VERSION
    assert projection.state == {} and projection.applied_versions == {}
    assert projection.unknown_versions == {"2": 1}
    assert projection.counts == {"applied": 0, "duplicate": 0, "stale": 0}
    assert "chessboard_event_unknown_contract_version" in caplog.text and "'2'" in caplog.text
    # the same aggregate's version 1 event still applies: nothing of the other version was kept
    assert projection.apply(event(payload)) == APPLIED


def test_a_consumer_of_version_2_skips_version_1():
    projection = EventProjection(contract_version=2, fields={})
    assert projection.apply(event(project())) == UNKNOWN_VERSION
    assert projection.unknown_versions == {"1": 1}

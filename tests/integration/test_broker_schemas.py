"""The broker checks the contract too (docs/events.md#schemas): the tests' and the demo's Tansu runs
with the project's schemas (`--schema-registry`, runtime/embedded.py BROKER_SCHEMAS) and refuses,
with INVALID_RECORD, an event that breaks its topic's schema, where consumers would meet it."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from confluent_kafka import Producer

from pin_chessboard_pipelines.events import exact_json
from pin_chessboard_pipelines.events import payloads as p
from pin_chessboard_pipelines.events.fast_path import relay_pending
from pin_chessboard_pipelines.events.outbox import OutboxEvent, write_outbox
from pin_chessboard_pipelines.events.reference_consumer import read_events
from pin_chessboard_pipelines.events.topics_admin import ensure_topics
from tests.unit.test_event_contracts import HANDBOOK, project_row

pytestmark = [pytest.mark.kafka]

TOPIC = p.topic_of(p.PROJECT_UPSERTED)


def produce_one(bootstrap: str, topic: str, value: bytes) -> str:
    """Produces one message with a fresh producer; "ok" or the broker's error."""
    outcome: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000})
    producer.produce(
        topic,
        key=str(uuid.uuid4()).encode(),
        value=value,
        on_delivery=lambda e, _m: outcome.append(str(e) if e else "ok"),
    )
    producer.flush(15)
    return outcome[0]


def valid_project() -> dict:
    return exact_json.loads(exact_json.dumps(p.project_upserted(project_row(), HANDBOOK)))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"status": "Deleted"}, "an enum value the contract does not have"),
        ({"price": {"min": "5000000.00", "max": 12500000.5}}, "a decimal as a string"),
        ({"regionSnapshot": None}, "a regionId without its snapshot"),
        ({"version": None}, "a null version"),
    ],
)
def test_an_event_that_breaks_its_schema_is_refused_by_the_broker(broker, change, why):
    ensure_topics(broker)
    assert produce_one(broker, TOPIC, exact_json.dumps_bytes(valid_project())) == "ok"
    refused = produce_one(broker, TOPIC, exact_json.dumps_bytes({**valid_project(), **change}))
    assert "INVALID_RECORD" in refused, why
    assert "INVALID_RECORD" in produce_one(broker, TOPIC, b"not json")
    assert len(read_events(broker, [TOPIC])) == 1  # only the valid one reached the topic


def test_a_missing_field_is_refused_and_topics_without_a_schema_take_anything(broker):
    ensure_topics(broker)
    payload = valid_project()
    del payload["currencySnapshot"]
    assert "INVALID_RECORD" in produce_one(broker, TOPIC, exact_json.dumps_bytes(payload))
    assert produce_one(broker, "pin-chessboard-talent-sync.dlq", b"anything") == "ok"


def test_the_relay_cannot_put_an_invalid_event_on_the_topic(engine, broker):
    """An outbox row that breaks its schema (written around the builders) stays pending: the broker
    refuses it, the relay keeps it and the rows after it of its key, and consumers never see it."""
    key = str(uuid.uuid4())
    with engine.begin() as conn:
        write_outbox(conn, [OutboxEvent(p.DEVELOPER_UPSERTED, key, {"id": key, "version": 1})])
    relay_pending(engine, broker)
    with engine.connect() as conn:
        pending = conn.execute(
            sa.text("SELECT count(*) FROM chessboard.outbox_messages WHERE published_at IS NULL")
        ).scalar_one()
    assert pending == 1
    assert read_events(broker, [p.topic_of(p.DEVELOPER_UPSERTED)]) == []

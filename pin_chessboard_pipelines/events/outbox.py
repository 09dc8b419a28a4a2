"""The transactional outbox: events are written in the caller's transaction, relayed after commit."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.events.payloads import CONTRACT_VERSION, EVENT_TYPES, topic_of
from pin_chessboard_pipelines.store.tables import outbox_messages

# The contract headers, in contract order (chessboard-store.md, "Events").
HEADER_NAMES = (
    "messageId",
    "occurredAt",
    "aggregateId",
    "aggregateType",
    "eventType",
    "contractVersion",
    "correlationId",
)


@dataclass(frozen=True)
class OutboxEvent:
    event_type: str  # e.g. pin.chessboard.project-upserted
    aggregate_id: str  # PIN id = Kafka key
    payload: dict[str, Any]
    correlation_id: str = ""
    message_id: uuid.UUID = field(default_factory=uuid.uuid4)
    occurred_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def topic(self) -> str:
        return topic_of(self.event_type)

    @property
    def aggregate_type(self) -> str:
        return EVENT_TYPES[self.event_type][0]

    def headers(self) -> dict[str, str]:
        """The contract headers (chessboard-store.md, "Events")."""
        return {
            "messageId": str(self.message_id),
            "occurredAt": self.occurred_at.isoformat(),
            "aggregateId": self.aggregate_id,
            "aggregateType": self.aggregate_type,
            "eventType": self.event_type,
            "contractVersion": str(CONTRACT_VERSION),
            "correlationId": self.correlation_id,
        }

    def row(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "topic": self.topic,
            "message_key": self.aggregate_id,
            "payload": self.payload,
            "headers": self.headers(),
            "occurred_at": self.occurred_at,
        }


def write_outbox(conn: Connection, events: Sequence[OutboxEvent]) -> int:
    """Inserts the events in one multi-row statement; `id` order is their commit order."""
    if not events:
        return 0
    conn.execute(insert(outbox_messages), [event.row() for event in events])
    return len(events)


# One encoder for every message: compact separators, UTF-8 text (no \u escapes).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def payload_bytes(payload: dict[str, Any]) -> bytes:
    """The Kafka value of an event: its payload as compact UTF-8 JSON."""
    return _ENCODER.encode(payload).encode()

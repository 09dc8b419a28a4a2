"""The transactional outbox: events are written in the caller's transaction, relayed after commit."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.trace import SpanKind
from sqlalchemy.engine import Connection, Engine

from pin_chessboard_pipelines.events import exact_json
from pin_chessboard_pipelines.events.contracts import V1, Contract, published
from pin_chessboard_pipelines.events.payloads import EVENT_TYPES, topic_of
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.store.cursor import copy_in
from pin_chessboard_pipelines.store.queries import queries

# The contract headers, in contract order (docs/events.md#key-and-headers).
HEADER_NAMES = (
    "messageId",
    "occurredAt",
    "aggregateId",
    "aggregateType",
    "eventType",
    "contractVersion",
    "correlationId",
)
# The columns of an outbox row as the writer's COPY gives them (outbox.sql outbox_copy_in).
OUTBOX_COLUMNS = ("message_id", "topic", "message_key", "payload", "headers", "occurred_at")
# Beside them, the W3C trace context of the writer (README "Traces"): a consumer continues the trace
# of the import page or recalc project that wrote the event. Only when tracing is on.
TRACEPARENT = tracing.TRACEPARENT


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

    def headers(self, contract_version: int = 1, message_id: str | None = None) -> dict[str, str]:
        """The contract headers (docs/events.md#key-and-headers)."""
        return {
            "messageId": message_id or str(self.message_id),
            "occurredAt": self.occurred_at.isoformat(),
            "aggregateId": self.aggregate_id,
            "aggregateType": self.aggregate_type,
            "eventType": self.event_type,
            "contractVersion": str(contract_version),
            "correlationId": self.correlation_id,
        }

    def row(self) -> dict[str, Any]:
        """The event's outbox row (its first contract version's), by the columns _line writes."""
        values = (
            self.message_id,
            self.topic,
            self.aggregate_id,
            self.payload,
            self.headers(),
            self.occurred_at,
        )
        return dict(zip(OUTBOX_COLUMNS, values, strict=True))


def write_outbox(conn: Connection, events: Sequence[OutboxEvent]) -> int:
    """Writes the events in the caller's transaction; `id` order is their commit order. One row per
    published contract version (events/contracts.py), the versions of an event next to each other:
    each version's topic sees the events in the same order. The event's message_id is its first
    version's; the other versions' rows get their own."""
    if not events:
        return 0
    contracts = published()
    with _write_span(len(events) * len(contracts)):
        trace_headers = _trace_headers()
        if contracts == (V1,):
            lines = [
                _line(
                    str(event.message_id),
                    event.topic,
                    event.aggregate_id,
                    exact_json.dumps(event.payload),
                    _ENCODER.encode({**event.headers(), **trace_headers}),
                    event.occurred_at.isoformat(),
                )
                for event in events
            ]
        else:
            ids = iter(random_uuids(len(events) * (len(contracts) - 1)))
            lines = []
            for event in events:
                for n, contract in enumerate(contracts):
                    message_id = str(event.message_id) if n == 0 else next(ids)
                    headers = event.headers(contract.version, message_id)
                    lines.append(
                        _line(
                            message_id,
                            contract.topic(event.event_type),
                            event.aggregate_id,
                            exact_json.dumps(contract.build(event.event_type, event.payload)),
                            _ENCODER.encode({**headers, **trace_headers}),
                            event.occurred_at.isoformat(),
                        )
                    )
        return _copy(conn, lines)


def write_outbox_batch(
    conn: Connection, events: Sequence[tuple[str, str, dict[str, Any]]], correlation_id: str
) -> int:
    """The same rows for a page-sized batch of (event_type, aggregate id, payload): one occurredAt
    for the batch, message ids from one urandom call and the headers from a template (the
    import's hot path; a test checks the rows equal write_outbox's)."""
    if not events:
        return 0
    contracts = published()
    with _write_span(len(events) * len(contracts)):
        if contracts == (V1,):
            return _copy(conn, _batch_lines(events, correlation_id))
        return _copy(conn, _versioned_batch_lines(events, correlation_id, contracts))


def _batch_lines(events: Sequence[tuple[str, str, dict[str, Any]]], correlation_id: str) -> list[str]:
    occurred_at = datetime.now(UTC).isoformat()
    trace_header = "".join(f',"{k}":"{v}"' for k, v in _trace_headers().items())
    correlation = _ENCODER.encode(correlation_id)
    lines = []
    for message_id, (event_type, key, payload) in zip(random_uuids(len(events)), events, strict=True):
        headers = (
            f'{{"messageId":"{message_id}","occurredAt":"{occurred_at}","aggregateId":"{key}",'
            f'"aggregateType":"{EVENT_TYPES[event_type][0]}","eventType":"{event_type}",'
            f'"contractVersion":"1","correlationId":{correlation}{trace_header}}}'
        )
        lines.append(
            _line(message_id, _TOPICS[event_type], key, exact_json.dumps(payload), headers, occurred_at)
        )
    return lines


def _versioned_batch_lines(
    events: Sequence[tuple[str, str, dict[str, Any]]], correlation_id: str, contracts: Sequence[Contract]
) -> list[str]:
    """_batch_lines with one row per contract version, the versions of an event next to each other."""
    occurred_at = datetime.now(UTC).isoformat()
    trace_header = "".join(f',"{k}":"{v}"' for k, v in _trace_headers().items())
    correlation = _ENCODER.encode(correlation_id)
    ids = iter(random_uuids(len(events) * len(contracts)))
    lines = []
    for event_type, key, payload in events:
        for contract in contracts:
            message_id = next(ids)
            headers = (
                f'{{"messageId":"{message_id}","occurredAt":"{occurred_at}","aggregateId":"{key}",'
                f'"aggregateType":"{EVENT_TYPES[event_type][0]}","eventType":"{event_type}",'
                f'"contractVersion":"{contract.version}","correlationId":{correlation}{trace_header}}}'
            )
            value = exact_json.dumps(contract.build(event_type, payload))
            lines.append(_line(message_id, contract.topic(event_type), key, value, headers, occurred_at))
    return lines


def _write_span(rows: int) -> AbstractContextManager[Any]:
    """The outbox write of a page or project: its context is the one its messages carry."""
    return tracing.span(
        "outbox.write",
        {
            "messaging.system": "kafka",
            "messaging.operation.type": "create",
            "messaging.batch.message_count": rows,
        },
        kind=SpanKind.PRODUCER,
    )


def _trace_headers() -> dict[str, str]:
    traceparent = tracing.current_traceparent()
    return {TRACEPARENT: traceparent} if traceparent else {}


_TOPICS = {event_type: topic_of(event_type) for event_type in EVENT_TYPES}


def _line(message_id: str, topic: str, key: str, payload: str, headers: str, occurred_at: str) -> str:
    """One COPY text-format row (OUTBOX_COLUMNS); JSON never holds a raw tab or newline."""
    return f"{message_id}\t{topic}\t{key}\t{_copy_text(payload)}\t{_copy_text(headers)}\t{occurred_at}\n"


def _copy(conn: Connection, lines: list[str]) -> int:
    """One COPY of outbox rows (about twice as fast as a multi-row INSERT for page-sized batches,
    benchmarks/apply_bench.py) on the caller's connection and transaction."""
    return copy_in(conn, queries("outbox")["outbox_copy_in"], lines)


def _copy_text(json_text: str) -> str:
    """JSON text as a COPY text-format field: JSON never holds a raw tab or newline, so only the
    backslashes of its escapes need doubling."""
    return json_text.replace("\\", "\\\\")


def random_uuids(n: int) -> list[str]:
    """n random (version 4) UUID strings, as uuid.uuid4() would give, from one urandom call."""
    h = os.urandom(16 * n).hex()
    ids = []
    for i in range(0, 32 * n, 32):
        s = h[i : i + 32]
        ids.append(f"{s[:8]}-{s[8:12]}-4{s[13:16]}-{'89ab'[int(s[16], 16) & 3]}{s[17:20]}-{s[20:]}")
    return ids


# One encoder for every message: compact separators, UTF-8 text (no \u escapes).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def payload_bytes(payload: dict[str, Any]) -> bytes:
    """The Kafka value of an event: its payload as compact UTF-8 JSON."""
    return exact_json.dumps_bytes(payload)


def purge_published(
    engine: Engine, retention_seconds: float, *, batch_size: int = 5000, max_batches: int = 100
) -> int:
    """Deletes published rows older than the retention in bounded batches; returns how many."""
    statement = queries("outbox")["outbox_purge_published"]
    deleted = 0
    for _ in range(max_batches):
        with engine.begin() as conn:
            n = conn.execute(
                statement, {"retention_seconds": float(retention_seconds), "limit": batch_size}
            ).rowcount
        deleted += n
        if n < batch_size:
            break
    return deleted


def pending_summary(engine: Engine) -> dict[str, float]:
    """{"backlog", "max_id", "oldest_age_seconds"} of the unpublished rows."""
    with engine.connect() as conn:
        row = conn.execute(queries("outbox")["outbox_pending_summary"]).mappings().one()
    return {key: float(value) for key, value in row.items()}

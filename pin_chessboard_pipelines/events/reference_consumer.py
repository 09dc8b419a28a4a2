"""A reference consumer of the pin.chessboard.* topics: how a downstream context applies them.

Delivery is at least once with per-key order (docs/events.md#consumer-rules), so a consumer keeps
two rules:

1. dedupe by the `messageId` header: a redelivered message (relay crash between produce and mark,
   broker outage) is dropped;
2. version guard per aggregate: an event whose `version` is <= the version already applied for
   that aggregate on that topic is skipped (a replay, or an older snapshot arriving late).

and reads `contractVersion` as seed 003 asks (docs/events.md#versioning): a field its version's
schema does not name (a newer minor addition) is ignored, and an event of another major version
than the one it reads is logged and counted, never applied.

`EventProjection` is those rules over an in-memory "replica"; `read_events` reads topics from
the beginning without a consumer group (the tests and the README use both). Applying an event
continues the writer's trace: a `process` span whose parent is the message's `traceparent`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, TopicPartition
from opentelemetry.trace import SpanKind

from pin_chessboard_pipelines.events.contracts import registered, schema_of
from pin_chessboard_pipelines.events.kafka_client import list_topics
from pin_chessboard_pipelines.events.outbox import TRACEPARENT
from pin_chessboard_pipelines.events.payloads import EVENT_TYPES
from pin_chessboard_pipelines.events.topics_admin import contract_topics, end_offsets, probe_consumer
from pin_chessboard_pipelines.observability import tracing

log = logging.getLogger(__name__)

APPLIED = "applied"
DUPLICATE = "duplicate"
STALE = "stale"
UNKNOWN_VERSION = "unknown-version"  # another major contract version than the consumer reads


def known_fields(contract_version: int = 1) -> dict[str, frozenset[str]]:
    """event type -> the payload fields the schemas of `contract_version` name (what a consumer of
    that version applies; anything else is a newer minor field)."""
    if contract_version not in registered():
        return {}
    return {
        event_type: frozenset(schema_of(f"{event_type}.v{contract_version}")["properties"])
        for event_type in EVENT_TYPES
    }


@dataclass(frozen=True)
class ChessboardEvent:
    topic: str
    partition: int
    offset: int
    key: str
    headers: dict[str, str]
    payload: dict[str, Any]

    @property
    def message_id(self) -> str:
        return self.headers["messageId"]

    @property
    def event_type(self) -> str:
        return self.headers["eventType"]

    @property
    def aggregate_id(self) -> str:
        return self.headers.get("aggregateId") or self.key

    @property
    def version(self) -> int:
        return int(self.payload["version"])


def decode(message: Any) -> ChessboardEvent:
    """A confluent_kafka Message of a pin.chessboard topic as a ChessboardEvent."""
    headers = {name: (value or b"").decode() for name, value in (message.headers() or [])}
    key = message.key()
    return ChessboardEvent(
        topic=str(message.topic()),
        partition=int(message.partition() or 0),
        offset=int(message.offset() or 0),
        key=key.decode() if key is not None else "",
        headers=headers,
        payload=json.loads(message.value()),
    )


@dataclass
class EventProjection:
    """The latest payload per (topic, aggregate id), kept by the two consumer rules."""

    seen_message_ids: set[str] = field(default_factory=set)
    applied_versions: dict[tuple[str, str], int] = field(default_factory=dict)
    state: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {APPLIED: 0, DUPLICATE: 0, STALE: 0})
    # the major version this consumer reads, and the fields it knows of each event type
    contract_version: int = 1
    fields: dict[str, frozenset[str]] | None = None
    # contractVersion header -> events of that other version seen and not applied
    unknown_versions: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.fields is None:
            self.fields = known_fields(self.contract_version)

    def apply(self, event: ChessboardEvent) -> str:
        with tracing.span(
            f"process {event.topic}",
            {
                "messaging.system": "kafka",
                "messaging.operation.type": "process",
                "messaging.destination.name": event.topic,
                "messaging.destination.partition.id": str(event.partition),
                "messaging.kafka.offset": event.offset,
                "messaging.kafka.message.key": event.key,
                "messaging.message.id": event.headers.get("messageId"),
            },
            kind=SpanKind.CONSUMER,
            parent=tracing.context_from_traceparent(event.headers.get(TRACEPARENT)),
        ):
            outcome = self._apply(event)
            tracing.set_attributes({"pin.event.outcome": outcome})
            return outcome

    def _apply(self, event: ChessboardEvent) -> str:
        version = event.headers.get("contractVersion", "")
        if version != str(self.contract_version):
            # seed 003: not applied, logged and counted; a consumer of that version will apply it
            self.unknown_versions[version] = self.unknown_versions.get(version, 0) + 1
            log.warning(
                "chessboard_event_unknown_contract_version topic=%s messageId=%s contractVersion=%r reads=%d",
                event.topic,
                event.headers.get("messageId"),
                version,
                self.contract_version,
            )
            return UNKNOWN_VERSION
        if event.message_id in self.seen_message_ids:
            outcome = DUPLICATE
        else:
            self.seen_message_ids.add(event.message_id)
            key = (event.topic, event.aggregate_id)
            if event.version <= self.applied_versions.get(key, 0):
                outcome = STALE
            else:
                self.applied_versions[key] = event.version
                known = (self.fields or {}).get(event.event_type)
                payload = event.payload
                # a newer minor field is ignored: only the fields this version's schema names
                self.state[key] = (
                    payload if known is None else {k: v for k, v in payload.items() if k in known}
                )
                outcome = APPLIED
        self.counts[outcome] += 1
        return outcome

    def apply_all(self, events: Iterable[ChessboardEvent]) -> EventProjection:
        for event in events:
            self.apply(event)
        return self


def read_events(
    bootstrap_servers: str,
    topics: Iterable[str] | None = None,
    *,
    until: Callable[[list[ChessboardEvent]], bool] | None = None,
    timeout: float = 30.0,
) -> list[ChessboardEvent]:
    """Every event of `topics` (default: all contract topics that exist) from offset 0.

    Without `until`: up to the high watermarks as of the call. With `until(events)`: keeps reading
    until it returns True, or raises TimeoutError after `timeout` seconds.
    """
    consumer = probe_consumer(bootstrap_servers)
    deadline = time.monotonic() + timeout
    try:
        metadata = list_topics(consumer, bootstrap_servers, timeout)
        wanted = list(topics) if topics is not None else list(contract_topics())
        partitions = [
            TopicPartition(name, p, 0)
            for name in wanted
            if name in metadata.topics and metadata.topics[name].error is None
            for p in sorted(metadata.topics[name].partitions)
        ]
        ends: dict[tuple[str, int], int] = {}
        if until is None:
            offsets = end_offsets(consumer, [(tp.topic, tp.partition) for tp in partitions], timeout)
            ends = {key: end for key, (low, end) in offsets.items() if end > low}
            partitions = [tp for tp in partitions if (tp.topic, tp.partition) in ends]
        events: list[ChessboardEvent] = []
        if not partitions:
            if until is None or until(events):
                return events
        else:
            consumer.assign(partitions)
        while True:
            if until is None and not ends:
                return events
            if until is not None and until(events):
                return events
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(events)} events in {timeout:.0f}s without reaching the goal")
            for message in consumer.consume(1000, 0.2):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise RuntimeError(f"consuming failed: {error.str()}")
                event = decode(message)
                events.append(event)
                end = ends.get((event.topic, event.partition))
                if end is not None and event.offset + 1 >= end:
                    del ends[(event.topic, event.partition)]
    finally:
        consumer.close()


def topic_counts(
    bootstrap_servers: str, topics: Iterable[str] | None = None, timeout: float = 10.0
) -> dict[str, int]:
    """Messages per topic (end - low over its partitions) of the contract topics that exist."""
    consumer = probe_consumer(bootstrap_servers)
    try:
        metadata = list_topics(consumer, bootstrap_servers, timeout)
        wanted = [t for t in (topics or contract_topics()) if t in metadata.topics]
        partitions = [(t, p) for t in wanted for p in sorted(metadata.topics[t].partitions)]
        offsets = end_offsets(consumer, partitions, timeout)
    finally:
        consumer.close()
    counts = dict.fromkeys(wanted, 0)
    for (topic, _), (low, end) in offsets.items():
        counts[topic] += end - low
    return counts


def latest_events(
    bootstrap_servers: str, topics: Iterable[str] | None = None, *, last: int = 5, timeout: float = 10.0
) -> list[ChessboardEvent]:
    """The `last` most recent events (by occurredAt) of `topics`, reading only each partition's tail."""
    consumer = probe_consumer(bootstrap_servers)
    try:
        metadata = list_topics(consumer, bootstrap_servers, timeout)
        wanted = [t for t in (topics or contract_topics()) if t in metadata.topics]
        offsets = end_offsets(
            consumer, [(t, p) for t in wanted for p in sorted(metadata.topics[t].partitions)], timeout
        )
        tails = {key: (max(low, end - last), end) for key, (low, end) in offsets.items() if end > low}
        events: list[ChessboardEvent] = []
        if tails:
            consumer.assign([TopicPartition(t, p, start) for (t, p), (start, _) in tails.items()])
            waiting = set(tails)
            deadline = time.monotonic() + timeout
            while waiting and time.monotonic() < deadline:
                for message in consumer.consume(1000, 0.2):
                    if message.error() is not None:
                        continue
                    event = decode(message)
                    events.append(event)
                    if event.offset + 1 >= tails[(event.topic, event.partition)][1]:
                        waiting.discard((event.topic, event.partition))
    finally:
        consumer.close()
    return sorted(events, key=lambda e: e.headers.get("occurredAt", ""))[-last:]

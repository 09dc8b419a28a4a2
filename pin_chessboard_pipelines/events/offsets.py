"""The offsets of the consumers of compacted topics (talent_sync/, handbook_sync/): every
partition of their topics, the lag of their group, and the offsets of a poll batch.

- `check_partitions`: every partition of `topics`, or a refusal (CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE)
  when the broker does not answer or a topic is missing.
- `group_lag`: messages after a consumer group's committed offsets.
- `poll_batch` / `rewind` / `commit_batch`: one poll batch, read again from its first offsets, or
  committed after its transaction (a failed commit only means the batch comes again).
- `partition_lag`: messages after the consumer's position (else its committed offset) per partition.
- `relay_fast_path`: the outbox relay's fast path after a commit.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from pin_chessboard_pipelines.errors import IMPORT_SOURCE_UNAVAILABLE, Refused, error_line
from pin_chessboard_pipelines.events.kafka_client import client_config, list_topics
from pin_chessboard_pipelines.events.relay import OutboxRelay
from pin_chessboard_pipelines.events.topics_admin import end_offsets, probe_consumer
from pin_chessboard_pipelines.observability.logs import log_event

log = logging.getLogger(__name__)

Partition = tuple[str, int]


def check_partitions(
    bootstrap_servers: str,
    topics: Iterable[str],
    who: str,
    what: str,
    consumer: Consumer | None = None,
    timeout: float = 10.0,
) -> set[Partition]:
    """Every partition of `topics`; refusals name `who` (the consumer) and `what` (the topics)."""
    topics = list(topics)
    probe = consumer or probe_consumer(bootstrap_servers)
    try:
        metadata = list_topics(probe, bootstrap_servers, timeout)
    except KafkaException as error:
        raise Refused(
            f"{who}: Kafka at {bootstrap_servers} did not answer: {error}", IMPORT_SOURCE_UNAVAILABLE
        ) from None
    finally:
        if consumer is None:
            probe.close()
    missing = [t for t in topics if t not in metadata.topics or metadata.topics[t].error is not None]
    if missing:
        raise Refused(f"{who}: {what} topic(s) missing: {', '.join(missing)}", IMPORT_SOURCE_UNAVAILABLE)
    return {(t, p) for t in topics for p in metadata.topics[t].partitions}


def group_lag(
    bootstrap_servers: str, group_id: str, topics: Iterable[str], who: str, what: str, timeout: float = 10.0
) -> int:
    """Messages of `topics` after the group's committed offsets (all of them where none is);
    missing topics are refused like in check_partitions."""
    probe = probe_consumer(bootstrap_servers)
    try:
        partitions = sorted(check_partitions(bootstrap_servers, topics, who, what, probe, timeout))
        ends = end_offsets(probe, partitions, timeout)
    finally:
        probe.close()
    reader = Consumer(client_config(bootstrap_servers, {"group.id": group_id, "enable.auto.commit": False}))
    try:
        committed = reader.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout)
    finally:
        reader.close()
    lag = 0
    for tp in committed:
        low, end = ends[(tp.topic, tp.partition)]
        lag += max(0, end - max(low, tp.offset))
    return lag


def poll_batch(consumer: Consumer, size: int, timeout: float, error_event: str) -> list[Any]:
    """Up to `size` messages; a fatal error raises, any other (but partition EOF) is logged."""
    messages = []
    for message in consumer.consume(size, timeout):
        error = message.error()
        if error is None:
            messages.append(message)
        elif error.fatal():
            raise KafkaException(error)
        elif error.code() != KafkaError._PARTITION_EOF:
            log_event(log, logging.WARNING, error_event, Error=repr(error.str()))
    return messages


def rewind(consumer: Consumer, messages: list[Any]) -> None:
    """Seek every partition of `messages` back to its first message there."""
    first: dict[Partition, int] = {}
    for m in messages:
        key = (m.topic(), m.partition())
        first[key] = min(first.get(key, m.offset()), m.offset())
    for (topic, partition), offset in first.items():
        consumer.seek(TopicPartition(topic, partition, offset))


def next_offsets(messages: list[Any]) -> list[TopicPartition]:
    """The offset after the last message of `messages` on each of their partitions."""
    last: dict[Partition, int] = {}
    for m in messages:
        key = (m.topic(), m.partition())
        last[key] = max(last.get(key, -1), m.offset())
    return [TopicPartition(t, p, offset + 1) for (t, p), offset in last.items()]


def commit_batch(consumer: Consumer, messages: list[Any], failed_event: str) -> None:
    """Offsets after the transaction: a failed commit is logged, the batch comes again."""
    offsets = next_offsets(messages)
    try:
        consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as error:  # the batch will be read again
        log_event(log, logging.WARNING, failed_event, Error=repr(error_line(error)))


def positions(consumer: Consumer, partitions: list[Partition], timeout: float) -> dict[Partition, int]:
    """Next offset to apply per partition: the consumer's position, else the committed offset
    (partitions with neither are left out)."""
    tps = [TopicPartition(t, p) for t, p in partitions]
    out = {(tp.topic, tp.partition): tp.offset for tp in consumer.position(tps)}
    unknown = [TopicPartition(t, p) for (t, p), offset in out.items() if offset < 0]
    if unknown:
        for tp in consumer.committed(unknown, timeout=timeout):
            out[(tp.topic, tp.partition)] = tp.offset if tp.offset >= 0 else -1
    return {key: offset for key, offset in out.items() if offset >= 0}


def partition_lag(
    consumer: Consumer, probe: Consumer, partitions: list[Partition], timeout: float
) -> dict[Partition, int]:
    """Messages after the next offset to apply, per partition (`probe`: see probe_consumer)."""
    if not partitions:
        return {}
    ends = end_offsets(probe, partitions, timeout)
    at = positions(consumer, partitions, timeout)
    lag = {}
    for key in partitions:
        low, end = ends[key]
        lag[key] = max(0, end - max(low, at.get(key, low)))
    return lag


def relay_fast_path(relay: OutboxRelay, failed_event: str) -> int:
    """The outbox relay's fast path after a commit: the rows published; rows it cannot publish
    now are the relay sweep's (a failure is logged)."""
    try:
        return relay.relay_pending().published
    except Exception as error:  # noqa: BLE001 - the relay sweep publishes them later
        log_event(log, logging.WARNING, failed_event, Error=repr(error_line(error)))
        return 0

"""Writes the synthetic dataset to the six compacted Talent topics (docs/talent-source.md#kafka-topics).

Key = Talent id, value = the snapshot JSON; every `tombstone_every`-th item of a topic is sent as a
tombstone (null value) instead. Items are generated one at a time, so memory stays flat for 1M objects.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.events.kafka_client import client_config, list_topics
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec, iter_items

POLL_EVERY = 1000  # serve delivery callbacks every this many messages


def ensure_topics(bootstrap_servers: str, timeout: float = 30) -> None:
    """Create the Talent topics as compacted topics; ones that exist are left as they are."""
    create_compacted_topics(bootstrap_servers, {s.topic: s.partitions for s in ENTITIES}, timeout)


def create_compacted_topics(
    bootstrap_servers: str, partitions: Mapping[str, int], timeout: float = 30
) -> None:
    """Creates the topics of `partitions` (topic -> partition count), compacted; ones that exist
    are left as they are."""
    admin = AdminClient(client_config(bootstrap_servers))
    list_topics(admin, bootstrap_servers, min(timeout, 10))  # a broker refusing the client: KafkaRefused
    new_topics = [
        NewTopic(topic, num_partitions=n, replication_factor=1, config={"cleanup.policy": "compact"})
        for topic, n in partitions.items()
    ]
    for topic, future in admin.create_topics(
        new_topics, operation_timeout=timeout, request_timeout=timeout
    ).items():
        try:
            future.result(timeout)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"creating topic {topic} failed: {e.args[0].str()}") from None


def publish_dataset(spec: DatasetSpec, bootstrap_servers: str, *, tombstone_every: int = 0) -> dict[str, int]:
    """Produce every entity of `spec` to its topic, parents first; returns messages per topic."""
    ensure_topics(bootstrap_servers)
    producer = Producer(
        client_config(
            bootstrap_servers,
            {
                "enable.idempotence": True,
                "linger.ms": 20,
                "batch.num.messages": 10000,
                "partitioner": "murmur2_random",  # the Java client's partitioner: same key, same partition
            },
        )
    )
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        if error is not None and len(failures) < 10:
            failures.append(error.str())

    counts: dict[str, int] = {}
    try:
        for stage in ENTITIES:
            sent = 0
            for index, item in enumerate(iter_items(spec, stage.collection)):
                tombstone = tombstone_every > 0 and (index + 1) % tombstone_every == 0
                value = json_value(None if tombstone else item)
                _produce(producer, stage.topic, item["id"].encode(), value, on_delivery)
                sent += 1
                if sent % POLL_EVERY == 0:
                    producer.poll(0)
            counts[stage.topic] = sent
        left = producer.flush(60)
    finally:
        producer.close()
    if left or failures:
        raise RuntimeError(f"publishing failed: {left} messages undelivered; {'; '.join(failures)}")
    return counts


def json_value(value: Mapping[str, Any] | None) -> bytes | None:
    """A message value as the source writes it: compact UTF-8 JSON; None (a tombstone) stays None."""
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _produce(
    producer: Producer,
    topic: str,
    key: bytes,
    value: bytes | None,
    on_delivery: Callable[[KafkaError | None, Message], None],
) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value, on_delivery=on_delivery)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)

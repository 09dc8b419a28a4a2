"""The topics the project creates: the pin.chessboard.* topics and the dead-letter topics, made
when missing with the contract's partition counts and the cluster's replication settings.

Brokers that auto-create topics would make them with their own default partition count, so the
relay creates the topics explicitly first and its producer never asks for auto-creation. A topic
that exists is never changed (operations.md "Production Kafka (v1.3)").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from pin_chessboard_pipelines.events.contracts import published
from pin_chessboard_pipelines.events.kafka_client import client_config, list_topics
from pin_chessboard_pipelines.events.payloads import EVENT_TYPES
from pin_chessboard_pipelines.settings import TopicReplication, topic_replication

log = logging.getLogger(__name__)

DEAD_LETTER_SUFFIX = ".dlq"  # pin-chessboard-talent-sync.dlq, pin-chessboard-handbook-sync.dlq


def contract_topics() -> dict[str, int]:
    """topic -> partitions (docs/events.md#topics) of every published contract version."""
    return {
        contract.topic(event_type): partitions
        for contract in published()
        for event_type, (_, partitions) in EVENT_TYPES.items()
    }


def new_topic(name: str, partitions: int, replication: TopicReplication) -> NewTopic:
    """How the project creates `name`: its replication factor (-1: the broker's default), its
    min.insync.replicas when set, and a dead-letter topic keeps its messages until replayed."""
    config: dict[str, str] = {}
    if replication.min_insync_replicas is not None:
        config["min.insync.replicas"] = str(replication.min_insync_replicas)
    if name.endswith(DEAD_LETTER_SUFFIX):
        config["retention.ms"] = "-1"
    return NewTopic(
        name, num_partitions=partitions, replication_factor=replication.replication_factor, config=config
    )


def topic_partitions(bootstrap_servers: str, timeout: float = 10.0) -> dict[str, int]:
    """Every topic the broker has, with its partition count (no auto-creation). A broker that
    refuses the client's TLS or login raises KafkaRefused rather than a timeout."""
    metadata = list_topics(AdminClient(client_config(bootstrap_servers)), bootstrap_servers, timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def ensure_topics(
    bootstrap_servers: str, topics: Mapping[str, int] | None = None, timeout: float = 10.0
) -> list[str]:
    """Creates the missing topics of `topics` (default: the contract's); returns the created ones.

    A topic that exists is left alone; one with another partition count is logged: repartitioning
    would move keys between partitions and break the per-key order consumers rely on.
    """
    wanted = dict(contract_topics() if topics is None else topics)
    existing = topic_partitions(bootstrap_servers, timeout)
    for name, partitions in wanted.items():
        if name in existing and existing[name] != partitions:
            log.warning("topic %s has %d partitions, the contract says %d", name, existing[name], partitions)
    replication = topic_replication()
    missing = [new_topic(name, n, replication) for name, n in wanted.items() if name not in existing]
    if not missing:
        return []
    admin = AdminClient(client_config(bootstrap_servers))
    created = []
    futures = admin.create_topics(missing, operation_timeout=timeout, request_timeout=timeout)
    for name, future in futures.items():
        try:
            future.result(timeout)
            created.append(name)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # a concurrent creator won
                raise
    if created:
        log.info("created topics %s", ", ".join(sorted(created)))
    return sorted(created)


def probe_consumer(bootstrap_servers: str) -> Consumer:
    """An assign-only consumer for offset probes and range reads (joins no group, commits nothing)."""
    return Consumer(
        client_config(
            bootstrap_servers,
            {
                "group.id": "pin-chessboard-offset-probe",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 10,
                "session.timeout.ms": 6000,
            },
        )
    )


def end_offsets(
    consumer: Consumer, partitions: Iterable[tuple[str, int]], timeout: float = 10.0
) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, end) per partition, end = the offset the next message will get.

    ListOffsets alone is not trusted for `end`: the Tansu broker answers the base offset of the
    last record batch + 1 there. So the last batch is read up to partition EOF, whose offset is
    the end on every broker. `consumer` must be an assign-only consumer with
    enable.partition.eof (see probe_consumer); its assignment is replaced.
    """
    partitions = list(partitions)
    result: dict[tuple[str, int], tuple[int, int]] = {}
    probes = []
    for topic, partition in partitions:
        low, reported = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        result[(topic, partition)] = (low, reported)
        if reported > low:
            probes.append(TopicPartition(topic, partition, max(low, reported - 1)))
    if not probes:
        return result
    waiting = {(tp.topic, tp.partition) for tp in probes}
    consumer.assign(probes)
    deadline = time.monotonic() + timeout
    try:
        while waiting:
            if time.monotonic() > deadline:
                raise KafkaException(
                    KafkaError(KafkaError._TIMED_OUT, "end offsets: no partition EOF in time")
                )
            for message in consumer.consume(10_000, 0.01):
                key = (str(message.topic()), int(message.partition() or 0))
                error = message.error()
                if error is None:
                    continue
                if error.code() == KafkaError._PARTITION_EOF and key in waiting:
                    low, _ = result[key]
                    result[key] = (low, int(message.offset() or 0))
                    waiting.discard(key)
                elif error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
    finally:
        consumer.unassign()
    return result

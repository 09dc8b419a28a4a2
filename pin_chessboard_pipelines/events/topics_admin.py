"""The pin.chessboard.* topics: created if missing with the contract's partition counts.

Brokers that auto-create topics would make them with their own default partition count, so the
relay creates the topics explicitly first and its producer never asks for auto-creation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from pin_chessboard_pipelines.events.payloads import EVENT_TYPES, topic_of

log = logging.getLogger(__name__)


def contract_topics() -> dict[str, int]:
    """topic -> partitions, chessboard-store.md "Events"."""
    return {topic_of(event_type): partitions for event_type, (_, partitions) in EVENT_TYPES.items()}


def topic_partitions(bootstrap_servers: str, timeout: float = 10.0) -> dict[str, int]:
    """Every topic the broker has, with its partition count (no auto-creation)."""
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    metadata = admin.list_topics(timeout=timeout)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}


def ensure_topics(
    bootstrap_servers: str, topics: Mapping[str, int] | None = None, timeout: float = 10.0
) -> list[str]:
    """Creates the missing topics of `topics` (default: the contract's); returns the created ones.

    A topic that exists with another partition count is left alone and logged: repartitioning
    would move keys between partitions and break the per-key order consumers rely on.
    """
    wanted = dict(contract_topics() if topics is None else topics)
    existing = topic_partitions(bootstrap_servers, timeout)
    for name, partitions in wanted.items():
        if name in existing and existing[name] != partitions:
            log.warning("topic %s has %d partitions, the contract says %d", name, existing[name], partitions)
    missing = [
        NewTopic(name, num_partitions=n, replication_factor=1)
        for name, n in wanted.items()
        if name not in existing
    ]
    if not missing:
        return []
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
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

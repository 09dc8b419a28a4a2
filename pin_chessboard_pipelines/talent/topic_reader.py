"""Reading the six compacted Talent topics (docs/talent-source.md#kafka-topics): what the TopicReplay
import source and the streaming consumer (talent_sync/) both need.

- Messages as items: a snapshot is its decoded JSON object; a tombstone (null value) is
  `{"id": key, TOMBSTONE: True}`; a value that is not a JSON object becomes
  `{"id": key, "undecodableValue": …}`, which the apply path quarantines. Each carries the
  message's position under SOURCE (`[topic, partition, offset]`): the rule of deletes
  (docs/talent-source.md#deletes) and the key of its quarantine row read it; it is no field of the
  snapshot and no quarantine payload keeps it.
- `check_topics`: every partition of the six topics, or a refusal when a topic is missing.
- `group_lag`: messages after the consumer group's committed offsets.
- `sync_running`: whether the streaming consumer holds its lock (it reads assigned partitions, so
  the consumer group shows no member while it runs).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any, NamedTuple

from confluent_kafka import Consumer
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.entities import TOPICS
from pin_chessboard_pipelines.events.offsets import check_partitions
from pin_chessboard_pipelines.events.offsets import group_lag as committed_lag
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP, TALENT_SYNC_LOCK

Item = dict[str, Any]
TOMBSTONE = "__tombstone__"
SOURCE = "__source__"


class Source(NamedTuple):
    """Where an item was read: its topic, partition and offset."""

    topic: str
    partition: int
    offset: int


def decode_message(key: bytes | None, value: bytes | None, source: Source | None = None) -> Item:
    """One message of a Talent topic as an item of the apply path (`source`: its position)."""
    item = _decode(key, value)
    if source is not None:
        item[SOURCE] = [source.topic, source.partition, source.offset]
    return item


def _decode(key: bytes | None, value: bytes | None) -> Item:
    key_text = key.decode("utf-8", "replace") if key is not None else None
    if value is None:
        return {"id": key_text, TOMBSTONE: True}
    try:
        item = json.loads(value, parse_float=Decimal)  # decimals keep their digits
    except ValueError:
        item = None
    if not isinstance(item, dict):
        return {"id": key_text, "undecodableValue": value[:512].decode("utf-8", "replace")}
    item.pop(SOURCE, None)  # only the reader says where a message was read
    return item


def message_source(message: Any) -> Source:
    """The position of a Kafka message (or of a dead letter's original message)."""
    return Source(message.topic(), int(message.partition()), int(message.offset()))


def source_of(item: Any) -> Source | None:
    """The position an item was read at; None for an item of no topic (ApiPull)."""
    if not isinstance(item, dict):
        return None
    value = item.get(SOURCE)
    if not isinstance(value, list | tuple) or len(value) != 3:
        return None
    try:
        return Source(str(value[0]), int(value[1]), int(value[2]))
    except (TypeError, ValueError):
        return None


def is_tombstone(item: Item) -> bool:
    return item.get(TOMBSTONE) is True


def check_topics(
    bootstrap_servers: str, consumer: Consumer | None = None, timeout: float = 10.0
) -> set[tuple[str, int]]:
    """Every partition of the six Talent topics; a broker that does not answer or a missing topic
    is refused (CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE)."""
    return check_partitions(bootstrap_servers, TOPICS, "talent-sync", "Talent", consumer, timeout)


def group_lag(bootstrap_servers: str, group_id: str = CONSUMER_GROUP, timeout: float = 10.0) -> int:
    """Messages of the six topics after the group's committed offsets (all of them where none is);
    missing topics are refused like in check_topics."""
    return committed_lag(bootstrap_servers, group_id, TOPICS, "talent-sync", "Talent", timeout)


def sync_running(engine: Engine) -> bool:
    """Whether a talent-sync consumer holds its lock now."""
    return TALENT_SYNC_LOCK.running(engine)


__all__ = [
    "SOURCE",
    "TOMBSTONE",
    "Source",
    "check_topics",
    "decode_message",
    "group_lag",
    "is_tombstone",
    "message_source",
    "source_of",
    "sync_running",
]

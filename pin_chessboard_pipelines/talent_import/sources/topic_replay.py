"""TopicReplay: the import reads the six compacted Talent topics (docs/talent-source.md#kafka-topics).

Mode = TopicReplay (docs/talent-initial-import.md#modes-apipull-and-topicreplay): the consumer
group `pin-chessboard-talent-sync` is reset to offset 0 and the topics are re-consumed through the
same apply path as the streaming consumer, stage by stage in parent -> child order; the import
keeps its pages, leases, resume, quarantine and DryRun.

A page is an offset range of one partition: cursor `"<partition>:<start>:<end>"` = offsets
[start, min(start + page_size, end)), where `end` is the partition's end offset when the walk
reached it. A cursor therefore names the same messages whenever it is read again (a re-claimed or
resumed page); compaction can only make a page shorter. The walk goes partition by partition.

Items are the messages decoded by talent/topic_reader.py; pages are applied with
replica/topic_items.apply_topic_items (they hold tombstones), as the streaming consumer's batches are.

Scoped replays (DeveloperIdFilter / ProjectIdFilter) keep the items whose parent chain is in scope;
the in-scope ids of a parent stage come from reading that parent's topic (cached per source).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import BY_NAME, BY_STAGE, DEVELOPER, PROJECT, TOPICS, Entity
from pin_chessboard_pipelines.errors import (
    IMPORT_SOURCE_UNAVAILABLE,
    Refused,
    TalentCancelled,
    TalentTransientError,
)
from pin_chessboard_pipelines.events.kafka_client import client_config, list_topics
from pin_chessboard_pipelines.events.topics_admin import end_offsets, probe_consumer
from pin_chessboard_pipelines.replica.topic_items import apply_topic_items
from pin_chessboard_pipelines.talent.topic_reader import (
    Item,
    Source,
    decode_message,
    is_tombstone,
    sync_running,
)
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP
from pin_chessboard_pipelines.talent_import.request import ImportMode, Scope
from pin_chessboard_pipelines.talent_import.sources.base import PerThread, PlannedPage

log = logging.getLogger(__name__)

# Group states in which members consume: the offsets are theirs then, a reset would race them.
ACTIVE_GROUP_STATES = frozenset(
    {
        ConsumerGroupState.STABLE,
        ConsumerGroupState.PREPARING_REBALANCING,
        ConsumerGroupState.COMPLETING_REBALANCING,
    }
)


# ---------------------------------------------------------------------------------------------
# Cursors


def format_cursor(partition: int, start: int, end: int) -> str:
    return f"{partition}:{start}:{end}"


def parse_cursor(cursor: str) -> tuple[int, int, int]:
    try:
        partition, start, end = (int(part) for part in cursor.split(":"))
    except ValueError:
        raise ValueError(f"{cursor!r} is not a TopicReplay cursor (partition:start:end)") from None
    if partition < 0 or start < 0 or end < start:
        raise ValueError(f"{cursor!r} is not a TopicReplay cursor (partition:start:end)")
    return partition, start, end


# ---------------------------------------------------------------------------------------------
# The source


class TopicReplaySource:
    """The ImportSource of Mode = TopicReplay. One reader consumer per thread (assign-only)."""

    mode = ImportMode.TOPIC_REPLAY
    apply = staticmethod(apply_topic_items)  # pages carry tombstones: apply them with this

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        group_id: str = CONSUMER_GROUP,
        reset_offsets: bool = True,
        should_stop: Callable[[], bool] | None = None,
        timeout: float = 30.0,
        engine: Engine | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.engine = engine  # the store: a running talent-sync holds its lock there
        self.group_id = group_id
        self.reset_offsets = reset_offsets  # False in a DryRun: it writes nothing, on Kafka either
        self.timeout = timeout
        self._should_stop = should_stop or (lambda: False)
        self._consumers = PerThread(lambda: probe_consumer(self.bootstrap_servers))
        self._scope_ids: dict[tuple[str, str], frozenset[str]] = {}
        self._partitions: dict[str, list[int]] = {}
        self._metadata: Any = None

    def __repr__(self) -> str:
        return f"TopicReplaySource({self.bootstrap_servers!r})"

    # -- availability and the group reset (docs/talent-initial-import.md#modes-apipull-and-topicreplay)

    def check_available(self) -> None:
        """The six topics exist and the group's offsets can be reset (the reset itself waits for
        the import lock: `after_lock`)."""
        try:
            metadata = list_topics(self._consumer(), self.bootstrap_servers, self.timeout)
        except KafkaException as error:
            raise self._unavailable(
                f"Kafka at {self.bootstrap_servers} did not answer: {_text(error)}"
            ) from None
        missing = [t for t in TOPICS if t not in metadata.topics or metadata.topics[t].error is not None]
        if missing:
            raise self._unavailable(f"Talent topic(s) missing: {', '.join(missing)}")
        admin = AdminClient(client_config(self.bootstrap_servers))
        self._check_compacted(admin)
        try:
            group = admin.describe_consumer_groups([self.group_id], request_timeout=self.timeout)[
                self.group_id
            ].result(self.timeout)
        except KafkaException as error:
            raise self._unavailable(
                f"consumer group {self.group_id} cannot be described: {_text(error)}"
            ) from None
        if group.state in ACTIVE_GROUP_STATES or self._sync_running():
            raise self._unavailable(
                f"consumer group {self.group_id} is in use (talent-sync is running): "
                "its offsets cannot be reset; stop the streaming sync first"
            )
        self._metadata = metadata

    def _check_compacted(self, admin: AdminClient) -> None:
        """A replay is the whole state only on compacted topics: a topic that deletes by retention
        has lost old snapshots. Kafka reports every config; Tansu only those set at creation, so a
        topic without cleanup.policy has the broker default, `delete`."""
        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in TOPICS]
        try:
            futures = admin.describe_configs(resources, request_timeout=self.timeout)
            policies = {
                resource.name: _cleanup_policy(future.result(self.timeout))
                for resource, future in futures.items()
            }
        except KafkaException as error:
            raise self._unavailable(f"the Talent topics' configs cannot be read: {_text(error)}") from None
        loose = [f"{t} (cleanup.policy={policies[t]})" for t in TOPICS if not is_compacted(policies[t])]
        if loose:
            raise self._unavailable(f"Talent topic(s) not compacted: {', '.join(loose)}")

    def after_lock(self) -> None:
        """The group reset to offset 0, once the import lock is held: a refused import touches no
        offset (docs/talent-initial-import.md#modes-apipull-and-topicreplay)."""
        if not self.reset_offsets:
            return
        metadata = self._metadata or self._consumer().list_topics(timeout=self.timeout)
        offsets = [
            TopicPartition(topic, partition, 0)
            for topic in TOPICS
            for partition in sorted(metadata.topics[topic].partitions)
        ]
        self._commit(offsets, "reset to offset 0")

    def on_completed(self, cursors: dict[str, list[str]]) -> None:
        """The handover to talent-sync: for every partition the replay walked, the group commits the
        offset up to which the replay applied (the end of its last page), so the streaming sync goes
        on from there and neither re-applies nor re-quarantines what the replay did.
        `cursors`: stage name -> the cursors of the run's pages."""
        if not self.reset_offsets:
            return
        ends: dict[tuple[str, int], int] = {}
        for stage, stage_cursors in cursors.items():
            topic = BY_STAGE[stage].topic
            for cursor in stage_cursors:
                partition, _, end = parse_cursor(cursor)
                ends[(topic, partition)] = max(end, ends.get((topic, partition), 0))
        if ends:
            offsets = [TopicPartition(t, p, end) for (t, p), end in sorted(ends.items())]
            self._commit(offsets, "committed where the replay ended")

    def _commit(self, offsets: list[TopicPartition], what: str) -> None:
        admin = AdminClient(client_config(self.bootstrap_servers))
        try:
            future = admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(self.group_id, offsets)], request_timeout=self.timeout
            )[self.group_id]
            answered = future.result(self.timeout)
        except KafkaException as error:
            raise self._unavailable(f"offsets of {self.group_id} cannot be set: {_text(error)}") from None
        failed = [tp for tp in answered.topic_partitions if tp.error is not None]
        if failed:
            raise self._unavailable(f"offsets of {self.group_id} cannot be set: {failed[0].error.str()}")
        log.info("consumer group %s %s on %d partitions", self.group_id, what, len(offsets))

    def _sync_running(self) -> bool:
        """talent-sync reads with assigned partitions (no group membership): its lock tells."""
        return self.engine is not None and sync_running(self.engine)

    def _unavailable(self, message: str) -> Refused:
        return Refused(f"TopicReplay: {message}", IMPORT_SOURCE_UNAVAILABLE)

    # -- the walk

    def plan_pages(
        self, stage: Entity, scope: Scope, *, page_size: int, start: str | None = None
    ) -> Iterator[PlannedPage]:
        topic = stage.topic
        position = parse_cursor(start) if start else self._first_range(topic, after=None)
        while position is not None:
            partition, first, end = position
            stop = min(first + page_size, end)
            items = self._filter(stage, scope, self._read(topic, partition, first, stop))
            following = (partition, stop, end) if stop < end else self._first_range(topic, after=partition)
            yield PlannedPage(
                format_cursor(partition, first, end),
                format_cursor(*following) if following is not None else None,
                items,
            )
            position = following

    def fetch_page(self, stage: Entity, cursor: str | None, scope: Scope, *, page_size: int) -> list[Item]:
        if cursor is None:  # the closing page of a walk that found no message
            return []
        partition, first, end = parse_cursor(cursor)
        return self._filter(
            stage, scope, self._read(stage.topic, partition, first, min(first + page_size, end))
        )

    def _topic_partitions(self, topic: str) -> list[int]:
        if topic not in self._partitions:
            metadata = self._consumer().list_topics(topic, timeout=self.timeout).topics.get(topic)
            if metadata is None or metadata.error is not None:
                raise self._unavailable(f"topic {topic} is missing")
            self._partitions[topic] = sorted(metadata.partitions)
        return self._partitions[topic]

    def _first_range(self, topic: str, after: int | None) -> tuple[int, int, int] | None:
        """(partition, low, end) of the first non-empty partition after `after`, or None."""
        for partition in self._topic_partitions(topic):
            if after is not None and partition <= after:
                continue
            low, end = self._offsets(topic, partition)
            if end > low:
                return partition, low, end
        return None

    def _offsets(self, topic: str, partition: int) -> tuple[int, int]:
        try:
            return end_offsets(self._consumer(), [(topic, partition)], self.timeout)[(topic, partition)]
        except KafkaException as error:
            raise TalentTransientError(f"offsets of {topic}[{partition}]: {_text(error)}") from None

    # -- reading

    def _read(self, topic: str, partition: int, first: int, stop: int) -> list[Item]:
        """The items at offsets [first, stop) of one partition (fewer when compaction removed some)."""
        if first >= stop:
            return []
        consumer = self._consumer()
        consumer.assign([TopicPartition(topic, partition, first)])
        items: list[Item] = []
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                if self._should_stop():
                    raise TalentCancelled(f"reading {topic}[{partition}] stopped")
                if time.monotonic() > deadline:
                    raise TalentTransientError(
                        f"reading {topic}[{partition}] offsets {first}..{stop - 1}: no progress in {self.timeout:.0f}s"
                    )
                for message in consumer.consume(min(stop - first, 5000), 0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            return items  # the partition ends before `stop` (truncated or compacted)
                        raise TalentTransientError(f"reading {topic}[{partition}]: {error.str()}")
                    offset = int(message.offset() or 0)
                    if offset >= stop:
                        return items
                    items.append(
                        decode_message(message.key(), message.value(), Source(topic, partition, offset))
                    )
                    if offset + 1 >= stop:
                        return items
        finally:
            consumer.unassign()

    def _read_all(self, topic: str) -> Iterator[Item]:
        """Every message of a topic up to its current end, partition by partition."""
        for partition in self._topic_partitions(topic):
            low, end = self._offsets(topic, partition)
            yield from self._read(topic, partition, low, end)

    def _consumer(self) -> Consumer:
        return self._consumers.get()

    # -- scopes

    def _filter(self, stage: Entity, scope: Scope, items: list[Item]) -> list[Item]:
        if not (scope.developer_id or scope.project_id):
            return items
        entity = stage.name
        by_own_id = entity == "developer" or (entity == "project" and scope.project_id is not None)
        own = self.scope_ids(entity, scope) if by_own_id else None
        field_name, parent = _scope_parent(entity)
        parents = None if by_own_id else self.scope_ids(parent, scope)
        kept = []
        for item in items:
            if is_tombstone(item):
                own = own if own is not None else self.scope_ids(entity, scope)
                keep = _lower(item.get("id")) in own
            elif parents is None:
                keep = _lower(item.get("id")) in (own or ())
            else:
                keep = _lower(item.get(field_name)) in parents
            if keep:
                kept.append(item)
        return kept

    def scope_ids(self, entity: str, scope: Scope) -> frozenset[str]:
        """Talent ids of `entity` in `scope`, from the topics (cached)."""
        key = (entity, scope.key)
        if key in self._scope_ids:
            return self._scope_ids[key]
        if entity == "developer":
            if scope.developer_id:
                ids = frozenset({scope.developer_id.lower()})
            else:
                ids = frozenset(d for d in (self._developer_of(scope.project_id),) if d)
        elif entity == "project" and scope.project_id:
            ids = frozenset({scope.project_id.lower()})
        else:
            field_name, parent = _scope_parent(entity)
            parents = self.scope_ids(parent, scope)
            ids = frozenset(
                item_id
                for item in self._read_all(BY_NAME[entity].topic)
                if not is_tombstone(item)
                and _lower(item.get(field_name)) in parents
                and (item_id := _lower(item.get("id"))) is not None
            )
        self._scope_ids[key] = ids
        return ids

    def _developer_of(self, project_id: str | None) -> str | None:
        wanted = _lower(project_id)
        found = None
        for item in self._read_all(PROJECT.topic):
            if not is_tombstone(item) and _lower(item.get("id")) == wanted:
                found = _lower(item.get("developerId"))  # the last snapshot wins
        return found

    def developer_ids(self, project_id: str | None = None) -> list[str]:
        if project_id:
            developer = self._developer_of(project_id)
            return [developer] if developer else []
        return list(self._developer_names())

    def developers(self, project_id: str | None = None) -> list[tuple[str, str]]:
        names = self._developer_names()
        return [
            (developer_id, names.get(developer_id, "")) for developer_id in self.developer_ids(project_id)
        ]

    def _developer_names(self) -> dict[str, str]:
        seen: dict[str, str] = {}
        for item in self._read_all(DEVELOPER.topic):
            if not is_tombstone(item) and isinstance(item.get("id"), str):
                seen[item["id"].lower()] = str(item.get("name") or "")
        return seen

    def close(self) -> None:
        self._consumers.close()


def _scope_parent(entity: str) -> tuple[str, str]:
    """(field of the item, parent entity) a scoped stage is filtered by; a developer by its own id."""
    e = entities.BY_NAME[entity]
    if e.scope_field is None or e.parent is None:
        return "id", entity
    return e.scope_field, e.parent


def _lower(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) else None


def _cleanup_policy(configs: dict[str, Any]) -> str:
    entry = configs.get("cleanup.policy")
    return "delete" if entry is None or entry.value is None else str(entry.value)


def is_compacted(policy: str) -> bool:
    """`compact` only: `compact,delete` still drops old keys by retention."""
    return {p.strip() for p in policy.split(",")} == {"compact"}


def _text(error: KafkaException) -> str:
    return error.args[0].str() if error.args and isinstance(error.args[0], KafkaError) else str(error)


__all__ = ["TopicReplaySource", "format_cursor", "parse_cursor"]

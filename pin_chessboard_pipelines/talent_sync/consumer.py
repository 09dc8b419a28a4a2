"""talent-chessboard-sync: the continuous consumer of the six Talent topics
(docs/talent-source.md#streaming-sync; the bootstrap import hands the replica over to it,
docs/talent-initial-import.md).

- Consumer group `pin-chessboard-talent-sync`, no auto-commit: the offsets of a poll batch are
  committed only after the batch's database transaction committed (a crash in between re-applies
  the batch, which the version guard makes a no-op).
- ONE consumer reads every partition of the six topics (assigned, starting at the group's
  committed offsets), under a PostgreSQL advisory lock: the stage barrier below needs to see all
  partitions, and per-key order needs one reader per key anyway. A second `talent-sync` is
  refused (CHESSBOARD_SYNC_LOCK_HELD); a dead one loses the lock with its session.
- One poll batch = one transaction, through the single apply path (replica/topic_items
  `apply_topic_items` -> replica/apply): the same mapping, version guard, quarantine, outbox
  events and recalc requests as ApiPull and TopicReplay; tombstones are soft deletes.
- Stage barrier, as in the import: a batch applies its topics in parent -> child order, and the
  messages of a child topic are applied only when every parent topic is caught up (its assigned
  partitions are at their end offset, measured after the fetch). Otherwise the child partitions
  are rewound to the held messages and paused until the parents caught up, so a child never
  meets CHESSBOARD_SYNC_PARENT_NOT_FOUND because its parent is merely further back in a topic.
- After the commit, the fast path of the outbox relay publishes the batch's events.
- A batch that fails is rolled back and read again as `sync_policy` (retry.py) decides: a store
  that restarts is waited for with backoff as long as the import would
  (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS), the lock taken again on a new session; any other error
  gets a few attempts; then the batch is applied message by message, and the messages that keep
  failing on their own go to the dead-letter topic `pin-chessboard-talent-sync.dlq`
  (docs/events.md#dead-letters) while the others apply (only the consumer's own failure stops the
  run: events/failures.py). `replay-dlq` applies the dead letters again once their cause is fixed,
  each with the items quarantined because its entity was missing (replica/waiting.py).
- Every item carries the position it was read at (talent/topic_reader.py SOURCE): a tombstone's
  position keeps older snapshots from bringing its entity back (docs/talent-source.md#deletes), and
  an item's quarantine row is written once per message.
- The loop is the one handbook-sync runs too (events/consume.py `BatchConsumer`); this module
  adds the six topics, the stage barrier and the apply path.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from contextlib import AbstractContextManager
from typing import Any, Unpack

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, TopicPartition
from opentelemetry.trace import SpanKind
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.errors import SYNC_LOCK_HELD, Refused, SyncFailed
from pin_chessboard_pipelines.events.consume_loop import BatchConsumer, ConsumerEvents, ConsumerOptions
from pin_chessboard_pipelines.events.offsets import Partition, partition_lag
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.observability.metrics import (
    TALENT_SYNC_LAG,
    TALENT_SYNC_LAG_SECONDS,
    TALENT_SYNC_MESSAGES,
    count_applied,
)
from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult
from pin_chessboard_pipelines.replica.topic_items import apply_topic_items
from pin_chessboard_pipelines.replica.waiting import apply_waiting_items
from pin_chessboard_pipelines.retry import Retrier
from pin_chessboard_pipelines.stopper import Stopper, StopReason
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache, load_handbook
from pin_chessboard_pipelines.talent.topic_reader import (
    check_topics,
    decode_message,
    is_tombstone,
    message_source,
)
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP, TALENT_SYNC_LOCK
from pin_chessboard_pipelines.talent_sync.result import SyncResult

log = logging.getLogger(__name__)

STAGE_INDEX = {stage.topic: i for i, stage in enumerate(ENTITIES)}


class TalentSync(BatchConsumer[SyncResult]):
    """The streaming consumer; `run()` consumes until stopped, idle (`until_idle`) or the deadline."""

    name = "talent-sync"
    lock = TALENT_SYNC_LOCK
    events = ConsumerEvents.named("talent_sync", "_")
    failed = SyncFailed
    logger = log
    group_id = CONSUMER_GROUP
    batch_size = 2000

    def __init__(
        self,
        engine: Engine,
        bootstrap_servers: str,
        *,
        debounce_seconds: float = 30.0,
        cap_seconds: float = 300.0,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(engine, bootstrap_servers, **options)
        self.debounce_seconds = debounce_seconds
        self.cap_seconds = cap_seconds
        self._paused: set[int] = set()  # stage indexes waiting for their parents
        self._contexts: dict[str, ApplyContext] = {}
        self._handbooks = HandbookCache()
        self._replaying = False  # apply_dead_letter: the items that waited for its entity come along

    # -- the loop's hooks ---------------------------------------------------------------------

    def _new_result(self) -> SyncResult:
        return SyncResult()

    def _partitions(self) -> set[Partition]:
        assert self._probe is not None
        return check_topics(self.bootstrap_servers, self._probe, self.timeout)

    def _prepare(self, stopper: Stopper) -> None:
        handbook = Retrier(self.policy, stopper)("read the handbook", self._handbook)
        self._handbooks = HandbookCache(handbook)
        self._contexts = {
            stage.topic: ApplyContext(
                correlation_id=self.correlation_id,
                handbook=handbook,
                debounce_seconds=self.debounce_seconds,
                cap_seconds=self.cap_seconds,
                stage=stage.stage,
            )
            for stage in ENTITIES
        }

    def _handbook(self) -> Any:
        with self.engine.connect() as conn:
            return load_handbook(conn)

    def _nothing_polled(self) -> bool:
        if self._paused:
            self._resume_ready()
        return not self._paused

    def _admit(self, messages: list[Any], result: SyncResult) -> list[Any]:
        TALENT_SYNC_LAG_SECONDS.set(oldest_message_age(messages))
        return self._barrier(messages, result)

    def _apply_batch(self, batch: list[Any], result: SyncResult) -> bool:
        # a store that restarted took the lock with the session: it is taken again before applying
        if self._lock is not None and not self._lock.ensure():
            raise Refused("another talent-sync consumer took over after a store restart", SYNC_LOCK_HELD)
        with _batch_span(batch):
            return self._apply(batch, result).events > 0

    def _stopped(self, result: SyncResult, reason: StopReason) -> None:
        result.stopped = reason

    def _completed(self, result: SyncResult) -> None:
        log_event(log, logging.INFO, "talent_sync_finished", **result.log_fields())

    def _finished(self) -> None:
        self._paused.clear()

    def _one_by_one(self, batch: list[Any]) -> list[Any]:
        # parents first, as a batch applies them (a stable sort keeps each partition's order)
        return sorted(batch, key=lambda m: STAGE_INDEX[m.topic()])

    def apply_dead_letter(self, message: Any) -> None:
        """A dead letter applied again, and in its transaction the items quarantined only because its
        entity was missing (replica/waiting.py)."""
        self._replaying = True
        try:
            super().apply_dead_letter(message)
        finally:
            self._replaying = False

    # -- the stage barrier --------------------------------------------------------------------

    def _barrier(self, messages: list[Any], result: SyncResult) -> list[Any]:
        """The messages that may be applied now; those of child topics whose parents lag are
        rewound and their topics paused."""
        stages_in_batch = {STAGE_INDEX[m.topic()] for m in messages}
        children = [s for s in stages_in_batch if s > 0]
        if not children:
            return messages
        lagging = self._first_lagging_stage(max(children))
        if lagging is None:
            return messages
        held_stages = {s for s in stages_in_batch if s > lagging}
        held = [m for m in messages if STAGE_INDEX[m.topic()] in held_stages]
        for stage in held_stages:
            self._pause(stage)
        self._rewind(held)
        result.held += 1
        return [m for m in messages if STAGE_INDEX[m.topic()] not in held_stages]

    def _first_lagging_stage(self, below: int) -> int | None:
        """The first stage (index < below) whose assigned partitions are not at their end."""
        lag = self._lag_by_stage(range(below))
        return next((stage for stage in range(below) if lag.get(stage, 0) > 0), None)

    def _lag_by_stage(self, stages: range | list[int]) -> dict[int, int]:
        wanted = {ENTITIES[s].topic for s in stages}
        partitions = sorted(tp for tp in self._assigned if tp[0] in wanted)
        if not partitions:
            return {}
        assert self._consumer is not None and self._probe is not None
        lag: dict[int, int] = defaultdict(int)
        for key, n in partition_lag(self._consumer, self._probe, partitions, self.timeout).items():
            lag[STAGE_INDEX[key[0]]] += n
        return lag

    def _lag(self) -> int:
        total = sum(self._lag_by_stage(list(range(len(ENTITIES)))).values())
        TALENT_SYNC_LAG.set(total)
        if total == 0:
            TALENT_SYNC_LAG_SECONDS.set(0)
        return total

    def _pause(self, stage: int) -> None:
        assert self._consumer is not None
        topic = ENTITIES[stage].topic
        self._consumer.pause([TopicPartition(t, p) for t, p in self._assigned if t == topic])
        self._paused.add(stage)

    def _resume_ready(self) -> None:
        assert self._consumer is not None
        lag = self._lag_by_stage(range(max(self._paused)))
        for stage in sorted(self._paused):
            if all(lag.get(parent, 0) == 0 for parent in range(stage)):
                topic = ENTITIES[stage].topic
                self._consumer.resume([TopicPartition(t, p) for t, p in self._assigned if t == topic])
                self._paused.discard(stage)

    # -- applying -----------------------------------------------------------------------------

    def _apply(self, batch: list[Any], result: SyncResult) -> ApplyResult:
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for message in batch:  # consume() keeps the order of each partition
            by_topic[message.topic()].append(
                decode_message(message.key(), message.value(), message_source(message))
            )
        total = ApplyResult()
        applied: list[tuple[str, ApplyResult, int]] = []
        with self.engine.begin() as conn:
            # the names of this transaction's events are the handbook's now, not the run's start
            # (a rename commits between batches: docs/store.md#handbook-sync)
            handbook = self._handbooks.for_publish(conn)
            for context in self._contexts.values():
                context.handbook = handbook
            for stage in ENTITIES:  # parent -> child
                items = by_topic.get(stage.topic)
                if items:
                    r = apply_topic_items(conn, stage.name, items, self._contexts[stage.topic])
                    applied.append((stage.stage, r, sum(1 for i in items if is_tombstone(i))))
            if self._replaying:
                released = apply_waiting_items(
                    conn,
                    _present(by_topic, applied),
                    {stage.name: self._contexts[stage.topic] for stage in ENTITIES},
                    lambda child, r: applied.append((child.stage, r, 0)),
                )
                if released:
                    log_event(log, logging.INFO, "talent_sync_waiting_items_applied", Items=released)
        for stage_name, r, tombstones in applied:  # counted once the transaction committed
            result.add(stage_name, r, tombstones)
            total.events += r.events
            count_applied(r, "talent-sync")
            for name in ("applied", "skipped", "failed"):
                if getattr(r, name):
                    TALENT_SYNC_MESSAGES.labels(stage_name, name).inc(getattr(r, name))
        result.messages += len(batch)
        tracing.set_attributes(
            {f"pin.sync.{name}": getattr(total, name) for name in ("applied", "failed", "events")}
        )
        return total


def _present(
    by_topic: dict[str, list[dict[str, Any]]], applied: list[tuple[str, ApplyResult, int]]
) -> dict[str, set[str]]:
    """Entity name -> Talent ids of the snapshots of a batch that were not quarantined (so their
    rows are in the replica: applied, or newer already)."""
    quarantined = {str(external_id).lower() for _, r, _ in applied for external_id, _ in r.quarantined}
    present: dict[str, set[str]] = {}
    for stage in ENTITIES:
        ids = {
            str(item.get("id")).lower()
            for item in by_topic.get(stage.topic, ())
            if not is_tombstone(item) and item.get("id") is not None
        }
        present[stage.name] = ids - quarantined
    return present


def oldest_message_age(messages: list[Any], now: float | None = None) -> float:
    """Seconds since the oldest message of a poll batch was written (its Kafka timestamp): a batch
    starts at the first unapplied offset of each partition, so this is the age of the oldest
    snapshot not applied yet (docs/talent-source.md#streaming-sync, the lag alert)."""
    now = time.time() if now is None else now
    stamps = [ms for ms in (_timestamp_ms(m) for m in messages) if ms is not None]
    return max(0.0, now - min(stamps) / 1000) if stamps else 0.0


def _timestamp_ms(message: Any) -> int | None:
    kind, ms = message.timestamp()
    return ms if kind != TIMESTAMP_NOT_AVAILABLE and ms > 0 else None


def _batch_span(batch: list[Any]) -> AbstractContextManager[Any]:
    """The span of one poll batch (README "Traces"), linked to the contexts its messages carry."""
    return tracing.span(
        "talent_sync.batch",
        {
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.consumer.group.name": CONSUMER_GROUP,
            "messaging.batch.message_count": len(batch),
        },
        kind=SpanKind.CONSUMER,
        links=tracing.links_from_traceparents(
            value.decode(errors="replace")
            for message in batch
            for name, value in (message.headers() or ())
            if name == tracing.TRACEPARENT and value
        ),
    )


__all__ = ["SYNC_LOCK_HELD", "SyncFailed", "SyncResult", "TalentSync"]

"""handbook-sync (HR-6): the consumer of pin.handbook.regions.v1 / pin.handbook.cities.v1 and the
republish of the projects of a renamed region or city (docs/store.md#handbook-sync).

- Consumer group `pin-chessboard-handbook-sync`, no auto-commit; one consumer (advisory lock
  HANDBOOK_SYNC_LOCK) reads every partition of both topics from the group's committed offsets.
- One poll batch = one transaction: HANDBOOK_CHANGE_LOCK exclusively, the newest value per id
  under the version guard, invalid values quarantined (CHESSBOARD_SYNC_VALIDATION_FAILED), a
  pending republish row per renamed region / city, and the first republish batch of each. The
  offsets are committed after that commit.
- The rest of a republish runs in batches of `republish_batch_size` projects, one transaction
  each, walking the projects by id from the cursor in the pending row. A stop or a crash leaves
  the row, and the next run goes on from its cursor before it reads the topics again.
- After every commit the outbox relay's fast path publishes the events.
- The loop is the one talent-sync runs too (events/consume.py `BatchConsumer`); this module adds
  the handbook topics, the values' apply and the republish.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from typing import Any, Unpack

from confluent_kafka import Consumer
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import SYNC_VALIDATION_FAILED, HandbookSyncFailed, error_line
from pin_chessboard_pipelines.events.consume_loop import (
    BatchConsumer,
    BatchCounters,
    ConsumerEvents,
    ConsumerOptions,
)
from pin_chessboard_pipelines.events.offsets import Partition, check_partitions, group_lag, partition_lag
from pin_chessboard_pipelines.handbook_sync import store
from pin_chessboard_pipelines.handbook_sync.values import (
    HandbookValue,
    InvalidValue,
    Kind,
    decode,
    newest,
)
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.observability.metrics import (
    HANDBOOK_REPUBLISH_BATCH_DURATION,
    HANDBOOK_REPUBLISHED,
    HANDBOOK_SYNC_LAG,
    HANDBOOK_SYNC_MESSAGES,
    count_quarantined,
)
from pin_chessboard_pipelines.retry import FailureStreak, wait_after_failure
from pin_chessboard_pipelines.stopper import Stopper, StopReason
from pin_chessboard_pipelines.store.handbook import HANDBOOK_CONSUMER_GROUP, HANDBOOK_TOPICS
from pin_chessboard_pipelines.store.handbook_replica import HANDBOOK_SYNC_LOCK
from pin_chessboard_pipelines.talent.topic_reader import message_source

log = logging.getLogger(__name__)

# how a run ended, as `stopped` says it
STOPPED = {StopReason.DONE: "idle", StopReason.TIME_BUDGET: "deadline", StopReason.CANCELLED: "stopped"}


@dataclass
class HandbookSyncResult(BatchCounters):
    # tombstones are ignored: the replica keeps a deleted region / city
    created: int = 0
    renamed: int = 0
    republished: int = 0  # projects
    republish_batches: int = 0
    longest_transaction_seconds: float = 0.0
    # the longest transaction that held the handbook rows (a poll batch with its first batches)
    handbook_transaction_seconds: float = 0.0
    stopped: str = ""  # idle | deadline | stopped
    renames: list[dict[str, Any]] = field(default_factory=list)


class HandbookSync(BatchConsumer[HandbookSyncResult]):
    """`run()` consumes until stopped, idle (`until_idle`) or the deadline; a failing batch is
    read again as talent-sync's are (retry.py, sync_policy)."""

    name = "handbook-sync"
    lock = HANDBOOK_SYNC_LOCK
    events = ConsumerEvents.named("handbook-sync")
    failed = HandbookSyncFailed
    logger = log
    group_id = HANDBOOK_CONSUMER_GROUP
    batch_size = 1000

    def __init__(
        self,
        engine: Engine,
        bootstrap_servers: str,
        *,
        republish_batch_size: int = 500,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(engine, bootstrap_servers, **options)
        self.republish_batch_size = republish_batch_size

    # -- the loop's hooks ---------------------------------------------------------------------

    def _new_result(self) -> HandbookSyncResult:
        return HandbookSyncResult()

    def _partitions(self) -> set[Partition]:
        return check_handbook_topics(self.bootstrap_servers, self._probe, self.timeout)

    def _before_poll(self, result: HandbookSyncResult, stopper: Stopper) -> bool:
        # a republish left by a stop or a crash goes on before anything new is read
        return self._republish_pending(result, stopper)

    def _stopped(self, result: HandbookSyncResult, reason: StopReason) -> None:
        result.stopped = STOPPED.get(reason, "stopped")

    def _completed(self, result: HandbookSyncResult) -> None:
        self._log(logging.INFO, "handbook-sync-completed", **result.log_fields())

    def _log(self, level: int, event: str, **fields: Any) -> None:
        """One log line of this run, its CorrelationId last."""
        log_event(log, level, event, **fields, CorrelationId=self.correlation_id)

    # -- applying -----------------------------------------------------------------------------

    def _apply_batch(self, messages: list[Any], result: HandbookSyncResult) -> bool:
        values, invalid, tombstones = _decoded(messages)
        latest = newest(values)
        started = time.perf_counter()
        first_batches: list[store.BatchDone] = []
        with self.engine.begin() as conn:
            applied = store.apply_values(conn, latest, invalid, self.correlation_id)
            for rename in applied.renames or []:
                done = store.republish_batch(
                    conn, rename.kind, rename.id, self.republish_batch_size, self.correlation_id
                )
                if done is not None:
                    first_batches.append(done)
        seconds = time.perf_counter() - started
        # counted once the transaction committed
        self._count_applied(result, len(messages), tombstones, values, latest, applied, invalid, seconds)
        self._report(invalid, applied.renames or [], result)
        for done in first_batches:
            self._count_batch(done, seconds, result)
        return True  # the relay's fast path runs after every batch

    @staticmethod
    def _count_applied(
        result: HandbookSyncResult,
        messages: int,
        tombstones: int,
        values: list[HandbookValue],
        latest: list[HandbookValue],
        applied: store.Applied,
        invalid: list[InvalidValue],
        seconds: float,
    ) -> None:
        result.messages += messages
        result.tombstones += tombstones
        result.applied += applied.applied
        result.skipped += applied.skipped + (len(values) - len(latest))
        result.failed += applied.failed
        result.created += applied.created
        result.longest_transaction_seconds = max(result.longest_transaction_seconds, seconds)
        result.handbook_transaction_seconds = max(result.handbook_transaction_seconds, seconds)
        count_quarantined("handbook-sync", applied.quarantined)
        for kind in Kind:  # the older values of an id in the batch count as skipped
            counts = dict((applied.by_topic or {}).get(kind.topic, {"applied": 0, "skipped": 0}))
            counts["skipped"] += sum(1 for v in values if v.kind is kind) - sum(
                1 for v in latest if v.kind is kind
            )
            for name, n in counts.items():
                if n:
                    HANDBOOK_SYNC_MESSAGES.labels(kind.topic, name).inc(n)

    def _report(self, invalid: list[InvalidValue], renames: list[Any], result: HandbookSyncResult) -> None:
        """The quarantined values and the renames: counted and logged, one line each."""
        for q in invalid:
            HANDBOOK_SYNC_MESSAGES.labels(q.kind.topic, "failed").inc()
            where = {"Topic": q.kind.topic, "Key": q.key, "ErrorCode": SYNC_VALIDATION_FAILED}
            self._log(logging.WARNING, "handbook-value-quarantined", **where, Error=q.message)
        for rename in renames:
            result.renamed += 1
            kind, name, version = rename.kind.value, rename.new_name, rename.version
            result.renames.append({"kind": kind, "id": rename.id, "name": name, "version": version})
            item = {"Kind": kind, "HandbookId": rename.id, "OldName": rename.old_name, "NewName": name}
            self._log(logging.INFO, "handbook-renamed", **item, Version=version)

    def _republish_pending(self, result: HandbookSyncResult, stopper: Stopper) -> bool:
        """Republishes every pending region / city to its end; False when stopped in between."""
        with self.engine.connect() as conn:
            pending = store.pending_republishes(conn)
        for item in pending:
            streak = FailureStreak(self.policy)
            while True:
                if stopper.stopped():
                    return False
                started = time.perf_counter()
                try:
                    with self.engine.begin() as conn:
                        done = store.republish_batch(
                            conn, item.kind, item.handbook_id, self.republish_batch_size, self.correlation_id
                        )
                except Exception as error:  # a deadlock with another producer, the database restarting
                    result.retries += 1
                    if wait_after_failure(
                        streak, error, stopper, "handbook-sync-republish-retry", log
                    ).give_up:
                        raise HandbookSyncFailed(
                            f"a republish batch failed {streak.attempt} times: {error_line(error)}"
                        ) from error
                    continue
                streak.reset()
                if done is None:  # a newer rename or another run finished it
                    break
                self._count_batch(done, time.perf_counter() - started, result)
                self._relay_fast_path(result)
                if done.finished:
                    break
        return True

    def _count_batch(self, done: store.BatchDone, seconds: float, result: HandbookSyncResult) -> None:
        result.republished += done.projects
        result.republish_batches += 1
        result.longest_transaction_seconds = max(result.longest_transaction_seconds, seconds)
        HANDBOOK_REPUBLISHED.labels(done.kind.value).inc(done.projects)
        HANDBOOK_REPUBLISH_BATCH_DURATION.observe(seconds)
        item = {"Kind": done.kind.value, "HandbookId": done.handbook_id}
        batch = {"Projects": done.projects, "Batch": done.batches_total, "Seconds": round(seconds, 3)}
        self._log(logging.INFO, "handbook-republish-batch", **item, **batch)
        if done.finished:
            total = {"Projects": done.republished_total, "Batches": done.batches_total}
            self._log(logging.INFO, "handbook-republish-completed", **item, **total)

    def _lag(self) -> int:
        assert self._consumer is not None and self._probe is not None
        lag = sum(partition_lag(self._consumer, self._probe, sorted(self._assigned), self.timeout).values())
        HANDBOOK_SYNC_LAG.set(lag)
        return lag


def check_handbook_topics(
    bootstrap_servers: str, consumer: Consumer | None = None, timeout: float = 10.0
) -> set[tuple[str, int]]:
    """Every partition of the two handbook topics; a broker that does not answer or a missing topic
    is refused (CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE)."""
    return check_partitions(
        bootstrap_servers, HANDBOOK_TOPICS, "handbook-sync", "handbook", consumer, timeout
    )


def handbook_group_lag(
    bootstrap_servers: str, group_id: str = HANDBOOK_CONSUMER_GROUP, timeout: float = 10.0
) -> int:
    """Messages of the handbook topics after the group's committed offsets."""
    return group_lag(bootstrap_servers, group_id, HANDBOOK_TOPICS, "handbook-sync", "handbook", timeout)


def handbook_sync_running(engine: Engine) -> bool:
    return HANDBOOK_SYNC_LOCK.running(engine)


def republish_pending(engine: Engine) -> int:
    """Regions / cities whose republish is not finished (the sensor starts a run for them too)."""
    with engine.connect() as conn:
        return len(store.pending_republishes(conn))


def _decoded(messages: list[Any]) -> tuple[list[HandbookValue], list[InvalidValue], int]:
    """A batch's values, its invalid values (with their origin) and its tombstones' count."""
    values: list[HandbookValue] = []
    invalid: list[InvalidValue] = []
    tombstones = 0
    for m in messages:
        decoded = decode(m.topic(), m.key(), m.value())
        if decoded is None:
            tombstones += 1
        elif isinstance(decoded, InvalidValue):
            invalid.append(replace(decoded, source=message_source(m)))
        else:
            values.append(decoded)
    return values, invalid, tombstones

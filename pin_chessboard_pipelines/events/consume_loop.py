"""The poll-batch loop both consumers of compacted topics run (talent_sync/, handbook_sync/):
`BatchConsumer`, one consumer under the advisory lock, every partition from the group's committed
offsets (events/offsets.py), one poll batch = one transaction, offsets committed after it, a
failing batch read again as the failure policy decides, the outbox relay's fast path after each
commit; subclasses say how a batch is applied and how far behind they are.

Dead letters (events/dead_letters.py, docs/events.md#dead-letters): a batch that keeps failing
for a reason of its own (not a store that is away) is applied again message by message, one
transaction each; the messages that fail on their own then go to the consumer's dead-letter
topic (`<group>.dlq`) with their error and origin in headers, are counted, and the others apply,
however small the batch and however many failed. Only a failure of the consumer itself (the
store or schema broken, every message of the batch failing alike: events/failures.py) stops
the run with its offsets where they were.
"""

from __future__ import annotations

import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypedDict, TypeVar

from confluent_kafka import OFFSET_STORED, Consumer, TopicPartition
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import SYNC_LOCK_HELD, Refused, error_line
from pin_chessboard_pipelines.events.dead_letters import DeadLetterWriter, dead_letter_topic
from pin_chessboard_pipelines.events.failures import classify_failures, failure_of
from pin_chessboard_pipelines.events.kafka_client import group_consumer
from pin_chessboard_pipelines.events.offsets import (
    Partition,
    commit_batch,
    next_offsets,
    poll_batch,
    relay_fast_path,
    rewind,
)
from pin_chessboard_pipelines.events.relay import OutboxRelay
from pin_chessboard_pipelines.events.topics_admin import probe_consumer
from pin_chessboard_pipelines.observability.logs import counter_fields, counters, log_event
from pin_chessboard_pipelines.observability.metrics import CONSUMER_DEAD_LETTERS
from pin_chessboard_pipelines.retry import (
    PERMANENT,
    FailurePolicy,
    FailureStreak,
    sync_policy,
    transient_reason,
    wait_after_failure,
)
from pin_chessboard_pipelines.stopper import Stopper, StopReason
from pin_chessboard_pipelines.store.lock import AdvisoryLock, SessionLock

log = logging.getLogger(__name__)

# a failing poll batch is read again as retry.py's sync_policy decides
SYNC_POLICY = sync_policy()


@dataclass
class BatchCounters:
    """What the loop counts in a consumer's result, and the items both syncs count: a consumer's
    result extends it with its own figures."""

    batches: int = 0
    messages: int = 0
    tombstones: int = 0
    applied: int = 0
    skipped: int = 0
    failed: int = 0  # items quarantined
    published: int = 0  # outbox rows the fast path relayed
    retries: int = 0  # batches rolled back and read again
    dead_letters: int = 0  # messages written to the dead-letter topic (docs/events.md#dead-letters)
    seconds: float = 0.0

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return counters(self, after={"seconds": {"messagesPerSecond": round(self.messages_per_second, 1)}})

    def log_fields(self) -> dict[str, Any]:
        """The counters as the Key=value fields of a log line (lists and mappings left out)."""
        summary = self.as_dict()
        return counter_fields(summary, *(k for k, v in summary.items() if isinstance(v, list | dict)))


R = TypeVar("R", bound=BatchCounters)


@dataclass(frozen=True)
class ConsumerEvents:
    """The log events of a consumer's loop."""

    poll_error: str
    retry: str
    commit_failed: str
    relay_failed: str
    dead_letter: str

    @classmethod
    def named(cls, consumer: str, separator: str = "-") -> ConsumerEvents:
        """`<consumer>-consumer-error`, `<consumer>-retry`, … with the consumer's word separator."""

        def event(*words: str) -> str:
            return separator.join((consumer, *words))

        return cls(
            poll_error=event("consumer", "error"),
            retry=event("retry"),
            commit_failed=event("commit", "failed"),
            relay_failed=event("relay", "failed"),
            dead_letter=event("dead", "letter"),
        )


class ConsumerOptions(TypedDict, total=False):
    """The keyword arguments every BatchConsumer takes (see BatchConsumer.__init__)."""

    group_id: str
    batch_size: int
    poll_timeout: float
    correlation_id: str | None
    relay_events: bool
    policy: FailurePolicy
    timeout: float


class BatchConsumer(ABC, Generic[R]):
    """`run()` consumes until stopped, idle (`until_idle`) or the deadline (see the module's
    docstring). A subclass names itself, its lock, group, log events and failure, and applies a
    batch (`_apply_batch`); the other hooks default to doing nothing."""

    name: ClassVar[str]  # the refusal, the client id, the default correlation id
    lock: ClassVar[AdvisoryLock]  # one consumer at a time
    events: ClassVar[ConsumerEvents]
    failed: ClassVar[type[Exception]]  # raised when a poll batch keeps failing
    logger: ClassVar[logging.Logger]
    # the subclass's defaults; the values given to __init__ replace them for that instance
    group_id: str
    batch_size: int

    def __init__(
        self,
        engine: Engine,
        bootstrap_servers: str,
        *,
        group_id: str | None = None,
        batch_size: int | None = None,
        poll_timeout: float = 0.5,
        correlation_id: str | None = None,
        relay_events: bool = True,
        policy: FailurePolicy = SYNC_POLICY,
        timeout: float = 30.0,
    ) -> None:
        self.engine = engine
        self.bootstrap_servers = bootstrap_servers
        if group_id is not None:
            self.group_id = group_id
        if batch_size is not None:
            self.batch_size = batch_size
        self.poll_timeout = poll_timeout
        self.correlation_id = correlation_id or f"{self.name}:{uuid.uuid4()}"
        self.relay_events = relay_events
        self.policy = policy
        self.timeout = timeout
        self._assigned: set[Partition] = set()
        self._consumer: Consumer | None = None
        self._probe: Consumer | None = None
        self._relay: OutboxRelay | None = None
        self._lock: SessionLock | None = None
        self._dead_letters: DeadLetterWriter | None = None
        self._replay_ready = False

    @property
    def dead_letter_topic(self) -> str:
        return dead_letter_topic(self.group_id)

    # -- what a subclass says -----------------------------------------------------------------

    @abstractmethod
    def _new_result(self) -> R: ...

    @abstractmethod
    def _partitions(self) -> set[Partition]:
        """Every partition the consumer reads (self._probe is open)."""

    @abstractmethod
    def _apply_batch(self, batch: list[Any], result: R) -> bool:
        """Applies a poll batch in one transaction; True when the relay's fast path should run."""

    @abstractmethod
    def _lag(self) -> int:
        """Messages after the consumer's position on every partition."""

    @abstractmethod
    def _stopped(self, result: R, reason: StopReason) -> None:
        """Notes in `result` how the run ended."""

    @abstractmethod
    def _completed(self, result: R) -> None:
        """Logs the run's end."""

    def _prepare(self, stopper: Stopper) -> None:
        """Before the consumer is made (the partitions are known)."""

    def _before_poll(self, result: R, stopper: Stopper) -> bool:
        """Before every poll; False ends the run (stopped)."""
        return True

    def _nothing_polled(self) -> bool:
        """After a poll that brought nothing: whether the run may count as idle."""
        return True

    def _admit(self, messages: list[Any], result: R) -> list[Any]:
        """The messages of a poll batch to apply now (the others the subclass rewound)."""
        return messages

    def _finished(self) -> None:
        """After the consumer closed."""

    def _one_by_one(self, batch: list[Any]) -> list[Any]:
        """The order a failing batch is applied in, message by message (default: as polled)."""
        return batch

    # -- the dead-letter replay (events/dead_letters.py) --------------------------------------

    def apply_dead_letter(self, message: Any) -> None:
        """A dead letter applied again through the consumer's apply path, in a transaction of its
        own (raises what the apply raised)."""
        if not self._replay_ready:
            self._prepare(Stopper(None))
            self._replay_ready = True
        self._apply_batch([message], self._new_result())

    # -- the run ------------------------------------------------------------------------------

    def run(
        self,
        *,
        until_idle: bool = False,
        idle_seconds: float = 0.5,
        max_seconds: float | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> R:
        """Consumes until `should_stop()`, the deadline, or (`until_idle`) no message is left."""
        started = time.monotonic()
        deadline = None if max_seconds is None else started + max_seconds
        stopper = Stopper(should_stop, deadline=deadline)
        lock = SessionLock(self.lock, self.engine)
        with lock as taken:
            if not taken:
                raise Refused(f"another {self.name} consumer is running", SYNC_LOCK_HELD)
            self._lock = lock
            try:
                result = self._run_locked(until_idle, idle_seconds, stopper)
            finally:
                self._lock = None
        result.seconds = time.monotonic() - started
        self._completed(result)
        return result

    def _run_locked(self, until_idle: bool, idle_seconds: float, stopper: Stopper) -> R:
        result = self._new_result()
        self._probe = probe_consumer(self.bootstrap_servers)
        try:
            self._assigned = self._partitions()
            self._prepare(stopper)
            self._consumer = group_consumer(
                self.bootstrap_servers, self.group_id, f"pin-chessboard-{self.name}"
            )
            # every partition, from the group's committed offsets (earliest where there is none)
            self._consumer.assign([TopicPartition(t, p, OFFSET_STORED) for t, p in sorted(self._assigned)])
            self._relay = OutboxRelay(self.engine, self.bootstrap_servers) if self.relay_events else None
            self._dead_letters = DeadLetterWriter(self.bootstrap_servers, self.dead_letter_topic, self.name)
            self._loop(result, until_idle, idle_seconds, stopper)
        finally:
            if self._dead_letters is not None:
                self._dead_letters.close()
                self._dead_letters = None
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
            if self._relay is not None:
                self._relay.close()
                self._relay = None
            self._probe.close()
            self._probe = None
            self._finished()
        return result

    def _loop(self, result: R, until_idle: bool, idle_seconds: float, stopper: Stopper) -> None:
        assert self._consumer is not None
        streak = FailureStreak(self.policy)
        idle_since: float | None = None
        while not stopper.stopped():
            if not self._before_poll(result, stopper):
                break
            messages = poll_batch(self._consumer, self.batch_size, self.poll_timeout, self.events.poll_error)
            if not messages:
                if self._nothing_polled() and until_idle:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since >= idle_seconds and self._lag() == 0:
                        self._stopped(result, StopReason.DONE)
                        return
                continue
            idle_since = None
            batch = self._admit(messages, result)
            if not batch:
                continue
            try:
                relay = self._apply_batch(batch, result)
            except Refused:
                raise
            except Exception as error:  # roll back, read the batch again, as the policy decides
                result.retries += 1
                self._rewind(batch)
                decision = wait_after_failure(streak, error, stopper, self.events.retry, self.logger)
                if not decision.give_up:
                    continue
                if decision.reason != PERMANENT:  # the store stays away: stop, offsets as they were
                    raise self.failed(
                        f"a poll batch failed {streak.attempt} times: {error_line(error)}"
                    ) from error
                if not self._apply_one_by_one(batch, result, stopper, streak.attempt):
                    break  # stopped meanwhile: the batch comes again (applied messages are no-ops)
                for tp in next_offsets(batch):  # past the batch, which was rewound
                    self._consumer.seek(tp)
                relay = True
            streak.reset()
            commit_batch(self._consumer, batch, self.events.commit_failed)
            result.batches += 1
            if relay:
                self._relay_fast_path(result)
        self._stopped(result, stopper.reason or StopReason.CANCELLED)

    def _apply_one_by_one(self, batch: list[Any], result: R, stopper: Stopper, tries: int) -> bool:
        """A batch that failed `tries` times, one transaction per message; the messages that fail on
        their own go to the dead-letter topic, unless the verdict (events/failures.py) is that the
        consumer itself failed: then the run stops, its offsets where they were. False when stopped
        before the end."""
        failures: list[tuple[Any, BaseException]] = []
        applied: set[Partition] = set()  # partitions of which a message applied (not quarantined)
        for message in self._one_by_one(batch):
            streak = FailureStreak(self.policy)
            while True:
                try:
                    quarantined = result.failed
                    self._apply_batch([message], result)
                    if result.failed == quarantined:
                        applied.add((message.topic(), message.partition()))
                    break
                except Refused:
                    raise
                except Exception as error:  # noqa: BLE001 - a message's own failure is dead-lettered, any type
                    if transient_reason(error) is None:  # its own failure: the batch's tries were its
                        failures.append((message, error))
                        break
                    decision = wait_after_failure(streak, error, stopper, self.events.retry, self.logger)
                    if stopper.stopped():
                        return False
                    if decision.give_up:
                        raise self.failed(
                            f"a message failed {streak.attempt} times: {error_line(error)}"
                        ) from error
        verdict = classify_failures(len(batch), [failure_of(m, e) for m, e in failures], applied)
        if verdict.consumer_failure is not None:
            raise self.failed(
                f"the consumer's own failure, not its messages' ({len(failures)} of {len(batch)} "
                f"messages of a poll batch failed; offsets unchanged): {verdict.consumer_failure}"
            ) from failures[0][1]
        for index in verdict.dead_letters:
            message, cause = failures[index]
            self._dead_letter(message, cause, tries + 1, result)
        return True

    def _dead_letter(self, message: Any, error: BaseException, attempts: int, result: R) -> None:
        """The message to the dead-letter topic (flushed: the offset is committed past it next)."""
        assert self._dead_letters is not None
        try:
            self._dead_letters.send(message, error, attempts)
        except Exception as failure:  # noqa: BLE001 - nothing is skipped that is not in the dead-letter topic
            raise self.failed(
                f"a poison message could not be dead-lettered: {error_line(failure)}"
            ) from error
        result.dead_letters += 1
        CONSUMER_DEAD_LETTERS.labels(self.name, message.topic()).inc()
        log_event(
            self.logger,
            logging.ERROR,
            self.events.dead_letter,
            Topic=message.topic(),
            Partition=message.partition(),
            Offset=message.offset(),
            DeadLetterTopic=self.dead_letter_topic,
            Attempts=attempts,
            CorrelationId=self.correlation_id,
            Error=repr(error_line(error)),
        )

    def _rewind(self, messages: list[Any]) -> None:
        assert self._consumer is not None
        rewind(self._consumer, messages)

    def _relay_fast_path(self, result: R) -> None:
        if self._relay is not None:
            result.published += relay_fast_path(self._relay, self.events.relay_failed)

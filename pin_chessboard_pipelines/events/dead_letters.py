"""Dead letters of the project's consumers (talent-sync, handbook-sync; docs/events.md#dead-letters).

A message that keeps failing for its own sake (not a validation error, which is quarantined, and
not a store that is away, which stops the run) would block its partition: after a bounded number
of tries it is written to the consumer's dead-letter topic, as it was (key, value, headers), with
its error and origin in `pin-dlq-*` headers, and the consumer goes on. `replay_dead_letters`
applies the dead letters again once their cause is fixed: those that apply are done, those that
still fail are written again at the end of the topic, so the topic past the replay group's
offsets holds exactly the messages still waiting.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from confluent_kafka import OFFSET_STORED, KafkaException, Producer, TopicPartition
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import SYNC_LOCK_HELD, DeadLetterDeliveryFailed, Refused, error_line
from pin_chessboard_pipelines.events.kafka_client import client_config, group_consumer
from pin_chessboard_pipelines.events.topics_admin import end_offsets, ensure_topics, probe_consumer
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.store.lock import AdvisoryLock, SessionLock

log = logging.getLogger(__name__)

HEADER_PREFIX = "pin-dlq-"
ERROR = "pin-dlq-error"  # the last error, one line
ERROR_TYPE = "pin-dlq-error-type"  # its exception class
ORIGIN_TOPIC = "pin-dlq-origin-topic"
ORIGIN_PARTITION = "pin-dlq-origin-partition"
ORIGIN_OFFSET = "pin-dlq-origin-offset"
CONSUMER = "pin-dlq-consumer"  # talent-sync | handbook-sync
ATTEMPTS = "pin-dlq-attempts"  # tries before it was dead-lettered (replays add theirs)
FAILED_AT = "pin-dlq-failed-at"  # RFC 3339, UTC
ERROR_CHARS = 1000
DEAD_LETTER_PARTITIONS = 1  # the order of the dead letters is the order they failed in


def dead_letter_topic(consumer_group: str) -> str:
    """The dead-letter topic of a consumer group: `<group>.dlq`."""
    return f"{consumer_group}.dlq"


@dataclass(frozen=True)
class Origin:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class DeadLetter:
    """A message as its consumer applies it (the methods of a confluent_kafka Message it reads):
    the original topic, partition, offset, key, value and headers, with the dead letter's own."""

    origin: Origin
    key_bytes: bytes | None
    value_bytes: bytes | None
    original_headers: tuple[tuple[str, bytes], ...] = ()
    error: str = ""
    attempts: int = 0
    dead_letter_offset: int = -1

    def topic(self) -> str:
        return self.origin.topic

    def partition(self) -> int:
        return self.origin.partition

    def offset(self) -> int:
        return self.origin.offset

    def key(self) -> bytes | None:
        return self.key_bytes

    def value(self) -> bytes | None:
        return self.value_bytes

    def headers(self) -> list[tuple[str, bytes]]:
        return list(self.original_headers)

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)  # TIMESTAMP_NOT_AVAILABLE


def dead_letter_headers(
    message: Any, consumer: str, error: BaseException | str, attempts: int, now: datetime | None = None
) -> list[tuple[str, str | bytes | None]]:
    """The headers of a dead letter: its own (error, origin, consumer, attempts, when), then the
    message's, but earlier dead-letter headers."""
    text = error if isinstance(error, str) else error_line(error)
    error_type = "" if isinstance(error, str) else type(error).__name__
    when = (now or datetime.now(UTC)).isoformat(timespec="seconds").replace("+00:00", "Z")
    own = {
        ERROR: text[:ERROR_CHARS],
        ERROR_TYPE: error_type,
        ORIGIN_TOPIC: message.topic(),
        ORIGIN_PARTITION: str(message.partition()),
        ORIGIN_OFFSET: str(message.offset()),
        CONSUMER: consumer,
        ATTEMPTS: str(attempts),
        FAILED_AT: when,
    }
    kept = [(k, v) for k, v in (message.headers() or ()) if not k.startswith(HEADER_PREFIX)]
    headers: list[tuple[str, str | bytes | None]] = [(k, v.encode()) for k, v in own.items()]
    return headers + [(k, v if v is not None else b"") for k, v in kept]


def read_dead_letter(
    key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]], offset: int
) -> DeadLetter:
    """A dead letter read back from its topic: the original message and its error."""
    own: dict[str, str] = {}
    kept: list[tuple[str, bytes]] = []
    for name, raw in headers or ():
        if name.startswith(HEADER_PREFIX):
            own[name] = (raw or b"").decode("utf-8", "replace")
        else:
            kept.append((name, raw or b""))
    origin = Origin(
        own.get(ORIGIN_TOPIC, ""), int(own.get(ORIGIN_PARTITION, "-1")), int(own.get(ORIGIN_OFFSET, "-1"))
    )
    return DeadLetter(
        origin, key, value, tuple(kept), own.get(ERROR, ""), int(own.get(ATTEMPTS, "0") or 0), offset
    )


class DeadLetterWriter:
    """Writes a consumer's dead letters (the topic created on first use), each flushed before the
    consumer commits past it."""

    def __init__(self, bootstrap_servers: str, topic: str, consumer: str, timeout: float = 30.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.consumer = consumer
        self.timeout = timeout
        self._producer: Producer | None = None

    def send(self, message: Any, error: BaseException | str, attempts: int) -> None:
        if self._producer is None:
            ensure_topics(self.bootstrap_servers, {self.topic: DEAD_LETTER_PARTITIONS}, self.timeout)
            self._producer = Producer(
                client_config(self.bootstrap_servers, {"enable.idempotence": True, "acks": "all"})
            )
        failures: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        self._producer.produce(
            self.topic,
            key=message.key(),
            value=message.value(),
            headers=dead_letter_headers(message, self.consumer, error, attempts),
            on_delivery=delivered,
        )
        left = self._producer.flush(self.timeout)
        if left or failures:
            raise DeadLetterDeliveryFailed(
                f"the dead letter of {message.topic()}[{message.partition()}]@{message.offset()} was not "
                f"written to {self.topic}: {failures[0] if failures else 'no answer'}"
            )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(self.timeout)
            self._producer = None


class Applier(Protocol):
    """What replay_dead_letters needs of a consumer (events/consume_loop.py BatchConsumer)."""

    @property
    def name(self) -> str: ...

    @property
    def group_id(self) -> str: ...

    def apply_dead_letter(self, message: Any) -> None: ...


@dataclass
class ReplayResult:
    read: int = 0  # dead letters read (up to the topic's end when the replay started)
    applied: int = 0  # applied again: done
    failed_again: int = 0  # written again at the end of the topic, with the new error
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "applied": self.applied,
            "failedAgain": self.failed_again,
            "errors": self.errors[:20],
        }


def replay_group(consumer_group: str) -> str:
    """The consumer group whose offsets say how far the dead letters were replayed."""
    return f"{consumer_group}.dlq-replay"


def replay_dead_letters(
    engine: Engine,
    bootstrap_servers: str,
    applier: Applier,
    *,
    should_stop: Callable[[], bool] = lambda: False,
    timeout: float = 30.0,
) -> ReplayResult:
    """Every dead letter of `applier`'s topic past the replay group's offsets, up to the end the
    topic had when this started, applied again through the consumer's apply path, one transaction
    each; one that fails again is written again at the end, its offset committed either way. One
    replay at a time (an advisory lock of its own; refused with CHESSBOARD_SYNC_LOCK_HELD)."""

    topic = dead_letter_topic(applier.group_id)
    result = ReplayResult()
    lock = SessionLock(AdvisoryLock(f"Pin:lock:job:chessboard-{applier.name}-dlq-replay"), engine)
    with lock as taken:
        if not taken:
            raise Refused(f"another {applier.name} replay-dlq is running", SYNC_LOCK_HELD)
        ensure_topics(bootstrap_servers, {topic: DEAD_LETTER_PARTITIONS}, timeout)
        probe = probe_consumer(bootstrap_servers)
        try:
            partitions = [(topic, p) for p in range(DEAD_LETTER_PARTITIONS)]
            ends = {key: end for key, (_, end) in end_offsets(probe, partitions, timeout).items()}
        finally:
            probe.close()
        reader = group_consumer(
            bootstrap_servers, replay_group(applier.group_id), f"pin-chessboard-{applier.name}-dlq"
        )
        writer = DeadLetterWriter(bootstrap_servers, topic, applier.name, timeout)
        try:
            reader.assign([TopicPartition(t, p, OFFSET_STORED) for t, p in partitions])
            _replay_until(reader, writer, applier, ends, result, should_stop, timeout)
        finally:
            reader.close()
            writer.close()
    return result


def _replay_until(
    reader: Any,
    writer: DeadLetterWriter,
    applier: Applier,
    ends: dict[tuple[str, int], int],
    result: ReplayResult,
    should_stop: Callable[[], bool],
    timeout: float,
) -> None:
    done: set[tuple[str, int]] = {key for key, end in ends.items() if end <= 0}
    idle_polls = 0
    while len(done) < len(ends) and not should_stop():
        message = reader.poll(1.0)
        if message is None:
            idle_polls += 1
            if idle_polls * 1.0 >= timeout or _caught_up(reader, ends, done, timeout):
                return
            continue
        if message.error() is not None:
            continue
        idle_polls = 0
        key = (message.topic(), message.partition())
        if message.offset() >= ends[key]:  # written after the replay started (by it, or a consumer)
            done.add(key)
            continue
        letter = read_dead_letter(message.key(), message.value(), message.headers() or (), message.offset())
        result.read += 1
        try:
            applier.apply_dead_letter(letter)
            result.applied += 1
            log_event(log, logging.INFO, "dead-letter-replayed", Consumer=applier.name, **_fields(letter))
        except Refused:
            raise
        except Exception as error:  # noqa: BLE001 - still failing: to the end of the topic, with the new error
            writer.send(letter, error, letter.attempts + 1)
            result.failed_again += 1
            result.errors.append({**_origin(letter), "error": error_line(error)})
            log_event(
                log,
                logging.WARNING,
                "dead-letter-failed-again",
                Consumer=applier.name,
                **_fields(letter),
                Error=repr(error_line(error)),
            )
        try:
            reader.commit(offsets=[TopicPartition(key[0], key[1], message.offset() + 1)], asynchronous=False)
        except KafkaException as error:  # read again next time: applying it again is a no-op
            log_event(log, logging.WARNING, "dead-letter-commit-failed", Error=repr(error_line(error)))
        if message.offset() + 1 >= ends[key]:
            done.add(key)


def _caught_up(
    reader: Any, ends: dict[tuple[str, int], int], done: set[tuple[str, int]], timeout: float
) -> bool:
    """Whether the reader's committed offsets reached the ends (nothing left to read)."""
    committed = reader.committed([TopicPartition(t, p) for t, p in ends], timeout=timeout)
    for tp in committed:
        if tp.offset >= ends[(tp.topic, tp.partition)]:
            done.add((tp.topic, tp.partition))
    return len(done) == len(ends)


def _origin(letter: DeadLetter) -> dict[str, Any]:
    return {
        "topic": letter.origin.topic,
        "partition": letter.origin.partition,
        "offset": letter.origin.offset,
    }


def _fields(letter: DeadLetter) -> dict[str, Any]:
    return {
        "OriginTopic": letter.origin.topic,
        "OriginPartition": letter.origin.partition,
        "OriginOffset": letter.origin.offset,
        "DeadLetterOffset": letter.dead_letter_offset,
    }


__all__: Sequence[str] = [
    "DeadLetter",
    "DeadLetterWriter",
    "DeadLetterDeliveryFailed",
    "ReplayResult",
    "dead_letter_headers",
    "dead_letter_topic",
    "read_dead_letter",
    "replay_dead_letters",
]

"""The dead letters still waiting to be replayed (docs/events.md#dead-letters).

Waiting = in a consumer's dead-letter topic past the offsets the replay group committed:
`replay_dead_letters` (events/dead_letters.py) commits past every dead letter it read, and one that
failed again is written again at the end of the topic, so it waits again. Read here without
joining or committing anything (an assign-only consumer; the replay group's offsets are only
fetched), and nothing is created: a topic that does not exist has nothing waiting.

- `waiting_counts`: how many per consumer (the gauge `chessboard_consumer_dead_letters_waiting`
  of `metrics serve`, refreshed by `WaitingDeadLettersWatch`, and the alert
  CHESSBOARD_CONSUMER_DEAD_LETTERS);
- `list_waiting`: the dead letters themselves (key, origin, error, age), oldest first, for the
  `list_dead_letters` job and `pin-chessboard <consumer> dead-letters`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.events.dead_letters import (
    DEAD_LETTER_PARTITIONS,
    ERROR_TYPE,
    FAILED_AT,
    DeadLetter,
    dead_letter_topic,
    read_dead_letter,
    replay_group,
)
from pin_chessboard_pipelines.events.kafka_client import group_consumer
from pin_chessboard_pipelines.events.topics_admin import end_offsets, probe_consumer, topic_partitions
from pin_chessboard_pipelines.observability.logs import counters, log_event

log = logging.getLogger(__name__)

# consumer name (the `consumer` label, the pin-dlq-consumer header) -> its consumer group
CONSUMER_GROUPS: Mapping[str, str] = {
    "talent-sync": "pin-chessboard-talent-sync",
    "handbook-sync": "pin-chessboard-handbook-sync",
}
LIST_LIMIT = 100  # dead letters listed per consumer by default (the count is always the whole)
KEY_CHARS = 80
ERROR_CHARS = 300


# -- pure ------------------------------------------------------------------------------------


def waiting_from(low: int, end: int, committed: int | None) -> tuple[int, int]:
    """(first waiting offset, how many wait) of a dead-letter partition whose messages are
    [low, end) and whose replay group committed `committed` (None or negative: never)."""
    start = low if committed is None or committed < 0 else min(max(committed, low), end)
    return start, end - start


def age_seconds(failed_at: str, now: datetime) -> float | None:
    """Seconds since a dead letter's `pin-dlq-failed-at` (RFC 3339); None when unreadable."""
    try:
        when = datetime.fromisoformat(failed_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (now - when).total_seconds())


def human_age(seconds: float | None) -> str:
    """`45s`, `12m`, `3h 05m`, `2d 04h`; `?` when unknown."""
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600:02d}h"


def key_text(key: bytes | None) -> str:
    """A message key as text (UTF-8, replacement characters), shortened; `(none)` without one."""
    if key is None:
        return "(none)"
    text = key.decode("utf-8", "replace")
    return text if len(text) <= KEY_CHARS else text[: KEY_CHARS - 1] + "…"


@dataclass(frozen=True)
class WaitingDeadLetter:
    """One waiting dead letter as an operator reads it."""

    consumer: str
    offset: int  # in the dead-letter topic
    key: str
    origin_topic: str
    origin_partition: int
    origin_offset: int
    error: str
    error_type: str
    attempts: int
    failed_at: str
    age_seconds: float | None

    @property
    def origin(self) -> str:
        return f"{self.origin_topic}[{self.origin_partition}]@{self.origin_offset}"

    def as_dict(self) -> dict[str, Any]:
        age = None if self.age_seconds is None else round(self.age_seconds, 1)
        return {**counters(self), "ageSeconds": age}

    def line(self) -> str:
        """One log line: `dead-letter-waiting Consumer=… Key=… Origin=… Age=… Error=…`."""
        return (
            f"dead-letter-waiting Consumer={self.consumer} Offset={self.offset} Key={self.key!r} "
            f"Origin={self.origin} Age={human_age(self.age_seconds)} Attempts={self.attempts} "
            f"Error={self.error[:ERROR_CHARS]!r}"
        )


def waiting_letter(
    consumer: str, letter: DeadLetter, headers: Mapping[str, str], now: datetime
) -> WaitingDeadLetter:
    failed_at = headers.get(FAILED_AT, "")
    return WaitingDeadLetter(
        consumer=consumer,
        offset=letter.dead_letter_offset,
        key=key_text(letter.key_bytes),
        origin_topic=letter.origin.topic,
        origin_partition=letter.origin.partition,
        origin_offset=letter.origin.offset,
        error=letter.error,
        error_type=headers.get(ERROR_TYPE, ""),
        attempts=letter.attempts,
        failed_at=failed_at,
        age_seconds=age_seconds(failed_at, now),
    )


@dataclass
class WaitingDeadLetters:
    """A consumer's waiting dead letters: how many, and the first `limit` of them, oldest first."""

    consumer: str
    topic: str
    waiting: int = 0
    replayed_up_to: int = 0  # the first waiting offset (what the replay group committed)
    letters: list[WaitingDeadLetter] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        letters = {"listed": len(self.letters), "deadLetters": [letter.as_dict() for letter in self.letters]}
        return counters(self, after={"letters": letters}, leave_out=("letters",))


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def letters_markdown(listings: Iterable[WaitingDeadLetters]) -> str:
    """One markdown table of every listed dead letter (the Dagster UI's metadata)."""
    listings = list(listings)
    head = "; ".join(
        f"{w.consumer}: {w.waiting} waiting in `{w.topic}`"
        + (f" (the first {len(w.letters)} listed)" if len(w.letters) < w.waiting else "")
        for w in listings
    )
    rows = [letter for w in listings for letter in w.letters]
    if not rows:
        return f"{head}\n\nNo dead letter waits to be replayed."
    lines = [
        head,
        "",
        "| consumer | offset | key | origin | error | attempts | failed at | age |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.consumer} | {r.offset} | {_cell(r.key)} | {_cell(r.origin)} | {_cell(r.error[:ERROR_CHARS])} "
        f"| {r.attempts} | {_cell(r.failed_at)} | {human_age(r.age_seconds)} |"
        for r in rows
    ]
    return "\n".join(lines)


# -- the broker --------------------------------------------------------------------------------


def _topic_exists(bootstrap_servers: str, topic: str, timeout: float) -> bool:
    return topic in topic_partitions(bootstrap_servers, timeout)


def _positions(
    bootstrap_servers: str, consumer: str, timeout: float
) -> tuple[str, list[tuple[int, int, int]]]:
    """The dead-letter topic of `consumer` and, per partition, (partition, first waiting offset,
    end); no partitions when the topic does not exist."""
    group = CONSUMER_GROUPS[consumer]
    topic = dead_letter_topic(group)
    if not _topic_exists(bootstrap_servers, topic, timeout):
        return topic, []
    partitions = [(topic, p) for p in range(DEAD_LETTER_PARTITIONS)]
    probe = probe_consumer(bootstrap_servers)
    try:
        ends = end_offsets(probe, partitions, timeout)
    finally:
        probe.close()
    # the replay group's offsets, fetched without joining it (no subscribe, no assign, no commit)

    fetcher = group_consumer(bootstrap_servers, replay_group(group), f"pin-chessboard-{consumer}-dlq-list")
    try:
        committed = {
            tp.partition: tp.offset
            for tp in fetcher.committed([TopicPartition(t, p) for t, p in partitions], timeout=timeout)
        }
    finally:
        fetcher.close()
    out = []
    for _, p in partitions:
        low, end = ends[(topic, p)]
        start, _count = waiting_from(low, end, committed.get(p))
        out.append((p, start, end))
    return topic, out


def waiting_counts(
    bootstrap_servers: str, consumers: Iterable[str] = tuple(CONSUMER_GROUPS), timeout: float = 10.0
) -> dict[str, int]:
    """consumer -> dead letters waiting to be replayed."""
    counts = {}
    for consumer in consumers:
        _, positions = _positions(bootstrap_servers, consumer, timeout)
        counts[consumer] = sum(end - start for _, start, end in positions)
    return counts


def list_waiting(
    bootstrap_servers: str,
    consumer: str,
    *,
    limit: int = LIST_LIMIT,
    timeout: float = 10.0,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> WaitingDeadLetters:
    """`consumer`'s waiting dead letters: the count, and the first `limit` read, oldest first."""
    topic, positions = _positions(bootstrap_servers, consumer, timeout)
    result = WaitingDeadLetters(consumer, topic)
    if not positions:
        return result
    result.waiting = sum(end - start for _, start, end in positions)
    result.replayed_up_to = min(start for _, start, _ in positions)
    wanted = {p: (start, min(end, start + limit)) for p, start, end in positions if end > start}
    if not wanted or limit <= 0:
        return result
    reader = probe_consumer(bootstrap_servers)
    at = now()
    try:
        reader.assign([TopicPartition(topic, p, start) for p, (start, _) in wanted.items()])
        left = set(wanted)
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            message: Any = reader.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() != KafkaError._PARTITION_EOF:
                    log_event(
                        log, logging.WARNING, "dead-letter-list-read-error", Error=repr(str(message.error()))
                    )
                continue
            p, stop = message.partition(), wanted[message.partition()][1]
            if message.offset() < stop:
                headers = [(k, v) for k, v in message.headers() or ()]
                letter = read_dead_letter(message.key(), message.value(), headers, message.offset())
                own = {k: (v or b"").decode("utf-8", "replace") for k, v in headers}
                result.letters.append(waiting_letter(consumer, letter, own, at))
            if message.offset() + 1 >= stop:
                left.discard(p)
    finally:
        reader.close()
    result.letters.sort(key=lambda w: w.offset)
    return result


class WaitingDeadLettersWatch:
    """`waiting_counts` every `every_seconds` in a thread of its own (the exporter's scrapes read
    the last counts at once, never waiting for the broker); `read()` is {} until the first
    answer, and keeps the last counts while the broker does not answer."""

    def __init__(self, bootstrap_servers: str, every_seconds: float = 10.0, timeout: float = 10.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.every_seconds = every_seconds
        self.timeout = timeout
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dead-letters-watch", daemon=True)

    def read(self) -> dict[str, float]:
        with self._lock:
            return {consumer: float(count) for consumer, count in self._counts.items()}

    def start(self) -> WaitingDeadLettersWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=self.timeout + 5)

    def _loop(self) -> None:
        while True:
            try:
                counts = waiting_counts(self.bootstrap_servers, timeout=self.timeout)
                with self._lock:
                    self._counts = counts
            except Exception as error:  # noqa: BLE001 - the broker away: the last counts stay
                log_event(log, logging.WARNING, "dead-letters-watch-failed", Error=repr(error_line(error)))
            if self._done.wait(self.every_seconds):
                return

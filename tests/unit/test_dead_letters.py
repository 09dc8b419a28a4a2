"""The pure pieces of the consumers' dead letters: their headers read back, and when failed messages
of a batch count as poison messages."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from pin_chessboard_pipelines.events.consume import poison_messages
from pin_chessboard_pipelines.events.dead_letters import (
    dead_letter_headers,
    dead_letter_topic,
    read_dead_letter,
)


class _Message(SimpleNamespace):
    def topic(self) -> str:
        return self.t

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def headers(self) -> list:
        return self.h


def test_a_dead_letter_carries_its_error_and_origin_and_reads_back_as_its_message():
    message = _Message(
        t="talent.chessboard.developers.v1",
        p=2,
        o=41,
        h=[("traceparent", b"00-ab"), ("pin-dlq-error", b"old")],
    )
    at = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    headers = dead_letter_headers(message, "talent-sync", ValueError("bad\nsecond line"), 6, now=at)
    named = dict(headers)
    assert named["pin-dlq-origin-topic"] == b"talent.chessboard.developers.v1"
    assert (named["pin-dlq-origin-partition"], named["pin-dlq-origin-offset"]) == (b"2", b"41")
    assert named["pin-dlq-error-type"] == b"ValueError" and b"\n" not in named["pin-dlq-error"]
    assert (named["pin-dlq-consumer"], named["pin-dlq-attempts"]) == (b"talent-sync", b"6")
    assert named["pin-dlq-failed-at"] == b"2026-12-03T12:00:00Z"
    assert [h for h in headers if h[0] == "pin-dlq-error"] == [("pin-dlq-error", named["pin-dlq-error"])]
    letter = read_dead_letter(b"key", b"{}", headers, 7)
    assert (letter.topic(), letter.partition(), letter.offset()) == ("talent.chessboard.developers.v1", 2, 41)
    assert letter.headers() == [("traceparent", b"00-ab")] and letter.attempts == 6
    assert (letter.key(), letter.value(), letter.dead_letter_offset) == (b"key", b"{}", 7)
    assert dead_letter_topic("pin-chessboard-talent-sync") == "pin-chessboard-talent-sync.dlq"


def test_a_few_failed_messages_are_poison_and_many_are_the_consumers_failure():
    failed = [_Message(t="x", p=0, o=n, h=[]) for n in range(5)]
    assert poison_messages(failed[:1], 1) == failed[:1]  # one message alone: poison
    assert poison_messages(failed[:1], 40) == failed[:1]
    assert poison_messages(failed[:5], 40) is None  # one in ten at most
    assert poison_messages(failed[:2], 2) is None  # a whole batch: not poison
    assert poison_messages(failed[:3], 30) == failed[:3]
    assert poison_messages([], 40) == []

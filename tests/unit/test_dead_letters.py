"""The pure pieces of the consumers' dead letters: their headers read back, and whose failure it is
when messages of a batch fail on their own (events/failures.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from pin_chessboard_pipelines.events.dead_letters import (
    dead_letter_headers,
    dead_letter_topic,
    read_dead_letter,
)
from pin_chessboard_pipelines.events.failures import (
    ErrorSignature,
    Failed,
    Verdict,
    classify_failures,
    error_signature,
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


class _DriverError(Exception):
    def __init__(self, text: str, pgcode: str) -> None:
        super().__init__(text)
        self.pgcode = pgcode


class _Wrapped(Exception):
    """As SQLAlchemy wraps the driver's error (`orig`)."""

    def __init__(self, orig: BaseException) -> None:
        super().__init__(str(orig))
        self.orig = orig


def _failed(
    key: str, error: BaseException, topic: str = "talent.chessboard.projects.v1", partition: int = 0
) -> Failed:
    return Failed(topic, key.encode(), error_signature(error), partition)


REFUSED = _Wrapped(_DriverError("refused by a trigger", "P0001"))
PROJECTS = "talent.chessboard.projects.v1"


def test_messages_that_fail_on_their_own_are_dead_lettered_however_small_the_batch_and_however_many():
    two_versions = [_failed("p", REFUSED), _failed("p", REFUSED)]
    assert classify_failures(3, two_versions, {(PROJECTS, 0)}) == Verdict((0, 1))  # beside a good one
    assert classify_failures(3, two_versions) == Verdict((0, 1))  # the good one on another partition
    assert classify_failures(2, two_versions) == Verdict((0, 1))  # one entity's versions alone
    assert classify_failures(1, [_failed("p", REFUSED)]) == Verdict((0,))  # a lone message
    two_entities = [_failed("p", REFUSED), _failed("q", REFUSED, partition=1)]
    # alike, but other messages of their partitions applied: each failed on its own
    assert classify_failures(4, two_entities, {(PROJECTS, 0), (PROJECTS, 1)}) == Verdict((0, 1))
    many = [_failed(str(n), _Wrapped(_DriverError(f"project {n} refused", "P0001"))) for n in range(9)]
    assert classify_failures(10, many) == Verdict(tuple(range(9)))  # nine in ten, each its own error
    assert classify_failures(9, many) == Verdict(tuple(range(9)))  # all of them
    assert classify_failures(40, []) == Verdict(())


def test_the_consumers_own_failure_stops_the_run_and_says_which():
    missing = _Wrapped(_DriverError('relation "chessboard.projects" does not exist', "42P01"))
    verdict = classify_failures(5, [_failed("p", missing)], {(PROJECTS, 0)})  # whatever applied
    assert verdict.dead_letters == () and verdict.consumer_failure is not None
    assert "store or the schema is broken (SQLSTATE 42P01" in verdict.consumer_failure
    assert "does not exist" in verdict.consumer_failure
    read_only = _Wrapped(_DriverError("cannot execute INSERT in a read-only transaction", "25006"))
    assert classify_failures(1, [_failed("p", read_only)]).consumer_failure is not None

    bug = [_failed(str(n), AttributeError("'NoneType' object has no attribute 'x'")) for n in range(3)]
    alike = classify_failures(3, bug)  # every message of the batch, several entities, the same error
    assert alike.dead_letters == () and "messages of 3 entities failed alike" in str(alike.consumer_failure)
    objects = "talent.chessboard.property-objects.v1"
    check = _Wrapped(_DriverError('violates check constraint "no_rows"', "23514"))
    rows = [_failed(str(n), check, objects, n % 6) for n in range(37)]
    # every object that reached the store failed alike; the layouts of the batch applied, and the
    # objects quarantined for their data do not count
    assert classify_failures(40, rows, {("talent.chessboard.layouts.v1", 0)}).consumer_failure is not None
    assert classify_failures(40, rows, {(objects, 3)}).consumer_failure is None
    assert classify_failures(3, bug[:1] + [_failed("1", ValueError("x"))]) == Verdict((0, 1))


def test_an_error_signature_reads_the_drivers_sqlstate_through_its_wrappers():
    signature = error_signature(REFUSED)
    assert signature.kind == "SQLSTATE P0001" and not signature.consumers
    assert signature.line == "_DriverError: refused by a trigger"
    assert error_signature(ValueError("bad")) == ErrorSignature("ValueError", "ValueError: bad", False)
    assert error_signature(_Wrapped(_DriverError("disk full", "53100"))).consumers

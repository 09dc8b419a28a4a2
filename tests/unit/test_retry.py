"""The failure toolkit: backoff arithmetic, the transient/permanent classification, the failure
policy, the stopper and the retrier (no database)."""

from __future__ import annotations

import logging
import threading
import time

import psycopg2
import pytest
import requests
from sqlalchemy.exc import OperationalError

from pin_chessboard_pipelines.errors import Refused, RetryStopped, TalentTooSlow, TalentTransientError
from pin_chessboard_pipelines.retry import (
    Backoff,
    FailurePolicy,
    FailureStreak,
    Retrier,
    RetryDecision,
    sync_policy,
    transient_reason,
    wait_after_failure,
)
from pin_chessboard_pipelines.stopper import Stopper, StopReason


def test_delays_double_from_one_second_and_stop_at_the_cap():
    backoff = Backoff()
    assert [backoff.delay(a) for a in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff.delay(10_000) == 60


def test_the_waits_of_a_source_that_never_recovers_sum_to_the_budget():
    waits = list(Backoff(budget=600).schedule())
    assert waits[:7] == [1, 2, 4, 8, 16, 32, 60]
    assert max(waits) == 60
    assert sum(waits) == pytest.approx(600)
    assert len(waits) == 7 + 7 + 1  # 123 s, then 7 x 60 s, then the 57 s that are left


def test_the_last_wait_is_cut_to_what_the_budget_leaves_and_then_it_gives_up():
    backoff = Backoff(budget=10)
    assert backoff.next_delay(1, elapsed=0) == 1
    assert backoff.next_delay(4, elapsed=7) == 3  # 8 wanted, 3 left
    assert backoff.next_delay(5, elapsed=10) is None
    assert backoff.next_delay(1, elapsed=11) is None


def test_retry_after_replaces_the_computed_delay_but_stays_capped():
    backoff = Backoff(budget=600)
    assert backoff.next_delay(1, 0, retry_after=5) == 5
    assert backoff.next_delay(6, 0, retry_after=0) == 0
    assert backoff.next_delay(1, 0, retry_after=3600) == 60


def test_a_zero_budget_never_retries_and_bad_parameters_are_refused():
    assert list(Backoff(budget=0).schedule()) == []
    with pytest.raises(ValueError):
        Backoff(initial=0)
    with pytest.raises(ValueError):
        Backoff().delay(0)


class _HttpError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"GET /api/v1/projects answered {status}")
        self.status = status


class _PgError(Exception):
    def __init__(self, message: str, pgcode: str | None) -> None:
        super().__init__(message)
        self.pgcode = pgcode


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (_HttpError(503), "http-503"),
        (_HttpError(500), "http-500"),
        (_HttpError(429), "http-429"),
        (requests.ReadTimeout("read timed out"), "timeout"),
        (requests.ConnectTimeout("connect timed out"), "timeout"),
        (TimeoutError("timed out"), "timeout"),
        (requests.ConnectionError("connection reset by peer"), "connection-lost"),
        (requests.exceptions.ChunkedEncodingError("incomplete read"), "connection-lost"),
        (TalentTooSlow(), "timeout"),
        (TalentTransientError("GET /x failed: timed out (3 attempts)", None, 3, timed_out=True), "timeout"),
        (TalentTransientError("GET /x answered 503 (3 attempts)", 503, 3), "http-503"),
        (TalentTransientError("GET /x answered a malformed body (3 attempts)", 200, 3), "source-error"),
        (TalentTransientError("GET /x took long: timed out, said the body", None, 3), "source-error"),
        (ConnectionResetError(104, "reset"), "connection-lost"),
        (_PgError("deadlock detected", "40P01"), "deadlock"),
        (_PgError("could not serialize access", "40001"), "serialization-failure"),
        (_PgError("terminating connection due to administrator command", "57P01"), "database-restarting"),
        (_PgError("the database system is starting up", "57P03"), "database-restarting"),
        (
            psycopg2.OperationalError("server closed the connection unexpectedly\n\tThis probably means..."),
            "connection-lost",
        ),
        (
            psycopg2.OperationalError(
                'connection to server at "127.0.0.1", port 5432 failed: Connection refused'
            ),
            "connection-lost",
        ),
        (
            psycopg2.OperationalError(
                'connection to server at "127.0.0.1", port 5432 failed: FATAL:  the database system is shutting down'
            ),
            "database-restarting",
        ),
        (psycopg2.InterfaceError("connection already closed"), "connection-lost"),
    ],
)
def test_transient_failures(error, reason):
    assert transient_reason(error) == reason


@pytest.mark.parametrize(
    "error",
    [
        _HttpError(404),
        _HttpError(401),
        _HttpError(400),
        _PgError('relation "x" does not exist', "42P01"),
        _PgError("duplicate key value violates unique constraint", "23505"),
        _PgError("invalid input syntax for type numeric", "22P02"),
        psycopg2.OperationalError(
            'connection to server at "127.0.0.1", port 5432 failed: FATAL:  password authentication failed for user "x"'
        ),
        psycopg2.OperationalError(
            'connection to server at "127.0.0.1", port 5432 failed: FATAL:  database "nope" does not exist'
        ),
        ValueError("a bug"),
        KeyError("id"),
    ],
)
def test_permanent_failures(error):
    assert transient_reason(error) is None


def test_the_driver_error_decides_through_the_wrappers():
    orig = _PgError("deadlock detected", "40P01")
    wrapped = OperationalError("UPDATE chessboard.projects ...", {}, orig)
    assert transient_reason(wrapped) == "deadlock"
    try:
        try:
            raise _HttpError(502)
        except _HttpError as e:
            raise RuntimeError("stage Projects failed") from e
    except RuntimeError as outer:
        assert transient_reason(outer) == "http-502"


def test_a_4xx_before_a_transient_cause_is_permanent():
    try:
        try:
            raise TimeoutError("timed out")
        except TimeoutError as e:
            raise _HttpError(404) from e
    except _HttpError as outer:
        assert transient_reason(outer) is None


class _RetryAfterError(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__("GET /api/v1/projects answered 429")
        self.status = 429
        self.retry_after = seconds


class _Bug(Exception):
    pass


def test_the_policy_backs_off_transient_errors_until_the_budget_is_spent():
    policy = FailurePolicy(budget_seconds=10, initial=1, cap=4)
    dead = _PgError("terminating connection due to administrator command", "57P01")
    assert policy.decide(dead, 1, 0) == RetryDecision(1, "database-restarting")
    assert policy.decide(dead, 3, 3) == RetryDecision(4, "database-restarting")
    assert policy.decide(dead, 5, 8) == RetryDecision(2, "database-restarting")  # 2 s left
    spent = policy.decide(dead, 6, 10)
    assert spent.give_up and spent.reason == "database-restarting"
    # the attempt count does not bound transient errors: only the budget does
    assert not policy.decide(dead, 1000, 9).give_up


def test_the_policy_honours_retry_after_within_the_cap_and_the_budget():
    policy = FailurePolicy(budget_seconds=100, cap=60)
    assert policy.decide(_RetryAfterError(7), 1, 0) == RetryDecision(7, "http-429")
    assert policy.decide(_RetryAfterError(3600), 1, 0).wait == 60
    assert policy.decide(_RetryAfterError(30), 1, 90).wait == 10


def test_other_errors_get_their_attempts_and_permanent_types_none():
    policy = FailurePolicy(initial=2, attempts=3, permanent=(KeyError,))
    assert policy.decide(_Bug("x"), 1, 0) == RetryDecision(2, "permanent")
    assert policy.decide(_Bug("x"), 2, 2) == RetryDecision(4, "permanent")
    assert policy.decide(_Bug("x"), 3, 6).give_up
    assert policy.decide(KeyError("id"), 1, 0) == RetryDecision(None, "permanent")
    # a permanent type gives up even when its cause is transient
    try:
        try:
            raise TimeoutError("timed out")
        except TimeoutError as e:
            raise KeyError("id") from e
    except KeyError as outer:
        assert policy.decide(outer, 1, 0).give_up
    assert FailurePolicy(attempts=1).decide(_Bug("x"), 1, 0).give_up


def test_a_bad_policy_is_refused():
    with pytest.raises(ValueError):
        FailurePolicy(attempts=0)
    with pytest.raises(ValueError):
        FailurePolicy(initial=0)
    with pytest.raises(ValueError):
        FailurePolicy(budget_seconds=-1)


def test_a_stopper_stops_once_with_the_first_reason():
    stopper = Stopper()
    assert not stopper.stopped() and stopper.reason is None
    stopper.stop(StopReason.TIME_BUDGET)
    stopper.stop(StopReason.CANCELLED)
    assert stopper.stopped() and stopper() and stopper.reason is StopReason.TIME_BUDGET
    assert not stopper.sleep(5)  # stopped: returns at once


def test_a_probe_stops_the_stopper_as_cancelled():
    flag = {"stop": False}
    stopper = Stopper(lambda: flag["stop"])
    assert not stopper.stopped()
    flag["stop"] = True
    assert stopper.stopped() and stopper.reason is StopReason.CANCELLED
    flag["stop"] = False
    assert stopper.stopped()  # the answer is kept


def test_sleep_sleeps_the_whole_time_when_nobody_stops():
    started = time.monotonic()
    assert Stopper(lambda: False).sleep(0.15)
    assert time.monotonic() - started >= 0.15


def test_sleep_wakes_at_once_on_stop_from_another_thread():
    stopper = Stopper()
    threading.Timer(0.05, stopper.stop).start()
    started = time.monotonic()
    assert not stopper.sleep(30)
    assert time.monotonic() - started < 5
    assert stopper.reason is StopReason.CANCELLED


def test_sleep_notices_a_probe_while_sleeping():
    until = time.monotonic() + 0.1
    stopper = Stopper(lambda: time.monotonic() > until)
    assert not stopper.sleep(30)
    assert stopper.reason is StopReason.CANCELLED


def test_stopper_of_reuses_a_stopper_and_wraps_a_probe():
    stopper = Stopper()
    assert Stopper.of(stopper) is stopper
    assert not Stopper.of(None).stopped()
    assert Stopper.of(lambda: True).stopped()
    outer = Stopper(stopper)
    stopper.stop(StopReason.LIFETIME)
    assert outer.stopped() and outer.reason is StopReason.CANCELLED


def _flaky(failures: list[BaseException]):
    calls = []

    def operation() -> str:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "ok"

    return operation, calls


def test_the_retrier_retries_transient_errors_and_returns_the_result(caplog):
    dead = _PgError("the database system is starting up", "57P03")
    operation, calls = _flaky([dead, dead])
    retrier = Retrier(FailurePolicy(budget_seconds=5, initial=0.01), fields=lambda: {"Job": "test"})
    with caplog.at_level("WARNING"):
        assert retrier("read a row", operation) == "ok"
    assert len(calls) == 3
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retry ")]
    assert len(lines) == 2
    assert "Job=test What=read a row Reason=database-restarting Attempt=1" in lines[0]


def test_the_retrier_gives_up_with_the_last_error():
    operation, calls = _flaky([_Bug("a"), _Bug("b"), _Bug("c")])
    with pytest.raises(_Bug, match="b"):
        Retrier(FailurePolicy(initial=0.01, attempts=2))("work", operation)
    assert len(calls) == 2
    # a number = a transient-only policy: any other error is raised at once
    operation, calls = _flaky([_Bug("a")])
    with pytest.raises(_Bug):
        Retrier(5)("work", operation)
    assert len(calls) == 1


def test_the_retrier_gives_up_when_the_transient_budget_is_spent():
    clock = iter([0.0, 0.5, 2.0])
    lost = ConnectionResetError(104, "reset")
    operation, calls = _flaky([lost, lost, lost])
    retrier = Retrier(FailurePolicy(budget_seconds=1, initial=0.01), clock=lambda: next(clock))
    with pytest.raises(ConnectionResetError):
        retrier("work", operation)
    assert len(calls) == 3


def test_the_retrier_stops_while_waiting():
    stopper = Stopper()
    lost = ConnectionResetError(104, "reset")
    operation, calls = _flaky([lost, lost])
    threading.Timer(0.05, stopper.stop).start()
    started = time.monotonic()
    with pytest.raises(RetryStopped):
        Retrier(FailurePolicy(initial=30), stopper)("work", operation)
    assert time.monotonic() - started < 5 and len(calls) == 1


def test_a_streak_counts_attempts_from_the_first_failure_and_resets():
    clock = iter([10.0, 12.0, 20.0, 30.0])
    streak = FailureStreak(FailurePolicy(budget_seconds=5, initial=1), clock=lambda: next(clock))
    lost = ConnectionResetError(104, "reset")
    assert streak.decide(lost) == RetryDecision(1, "connection-lost")
    assert streak.decide(lost) == RetryDecision(2, "connection-lost")  # 2 s after the first
    assert streak.decide(lost).give_up  # 10 s after the first: the 5 s budget is spent
    streak.reset()
    assert streak.decide(lost) == RetryDecision(1, "connection-lost") and streak.attempt == 1


def test_an_error_that_declares_its_retry_reason_is_transient():
    class DeliveryFailed(Exception):
        retry_reason = "broker-unavailable"

    assert transient_reason(DeliveryFailed("3 messages not acknowledged")) == "broker-unavailable"
    assert FailurePolicy().decide(DeliveryFailed(), 1, 0) == RetryDecision(1, "broker-unavailable")


def test_wait_after_failure_logs_and_sleeps_the_wait_then_gives_up(caplog):
    stopper = Stopper()
    streak = FailureStreak(sync_policy(attempts=2, initial=0.01))
    with caplog.at_level(logging.WARNING):
        first = wait_after_failure(streak, ValueError("bad"), stopper, "consumer-retry")
        second = wait_after_failure(streak, ValueError("bad"), stopper, "consumer-retry")
    assert first.wait == 0.01 and not first.give_up and second.give_up
    assert [r.getMessage().split()[0] for r in caplog.records] == ["consumer-retry"]
    assert "Attempt=1" in caplog.records[0].getMessage()


def test_a_consumer_policy_refuses_at_once_and_waits_for_a_restarting_store():
    policy = sync_policy(retry_seconds=30)
    assert policy.decide(Refused("no", "CODE"), 1, 0).give_up
    assert policy.decide(ConnectionError("gone"), 50, 10).wait == 20

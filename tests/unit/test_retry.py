"""Backoff arithmetic and the transient/permanent classification of failures (pure)."""

from __future__ import annotations

import psycopg2
import pytest
import requests
from sqlalchemy.exc import OperationalError

from pin_chessboard_pipelines.retry import Backoff, is_transient, transient_reason


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
        (_HttpError(503), "answered 503"),
        (_HttpError(500), "answered 500"),
        (_HttpError(429), "answered 429"),
        (requests.ReadTimeout("read timed out"), "timeout"),
        (requests.ConnectTimeout("connect timed out"), "timeout"),
        (TimeoutError("timed out"), "timeout"),
        (requests.ConnectionError("connection reset by peer"), "connection lost"),
        (ConnectionResetError(104, "reset"), "connection lost"),
        (_PgError("deadlock detected", "40P01"), "deadlock"),
        (_PgError("could not serialize access", "40001"), "serialization failure"),
        (_PgError("terminating connection due to administrator command", "57P01"), "database restarting"),
        (_PgError("the database system is starting up", "57P03"), "database restarting"),
        (
            psycopg2.OperationalError("server closed the connection unexpectedly\n\tThis probably means..."),
            "connection lost",
        ),
        (
            psycopg2.OperationalError(
                'connection to server at "127.0.0.1", port 5432 failed: Connection refused'
            ),
            "connection lost",
        ),
        (
            psycopg2.OperationalError(
                'connection to server at "127.0.0.1", port 5432 failed: FATAL:  the database system is shutting down'
            ),
            "database restarting",
        ),
        (psycopg2.InterfaceError("connection already closed"), "connection lost"),
    ],
)
def test_transient_failures(error, reason):
    assert transient_reason(error) == reason
    assert is_transient(error)


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
        assert transient_reason(outer) == "answered 502"


def test_a_4xx_before_a_transient_cause_is_permanent():
    try:
        try:
            raise TimeoutError("timed out")
        except TimeoutError as e:
            raise _HttpError(404) from e
    except _HttpError as outer:
        assert transient_reason(outer) is None

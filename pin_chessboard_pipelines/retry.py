"""Retrying infrastructure failures: the backoff arithmetic and which errors are worth a retry.

talent-source.md, "Changes of v1.1": a page whose source read or transaction fails for a transient
reason (5xx, 429, timeout, connection loss, deadlock, the database restarting) is retried with
exponential backoff capped at 60 s for up to CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS (default 600).
Backoff and the classification are pure (no I/O, no clock); `Retrier` runs an operation again
after transient failures, sleeping between attempts and logging what it waits for.
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.observability.logs import log_event

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_CAP_SECONDS = 60.0
DEFAULT_BUDGET_SECONDS = 600.0

# SQLSTATEs of a failure that a new attempt can get past (PostgreSQL, appendix A).
TRANSIENT_SQLSTATES: dict[str, str] = {
    "40P01": "deadlock",
    "40001": "serialization failure",
    "55P03": "lock not available",
    "57P01": "database restarting",  # admin_shutdown: terminating connection
    "57P02": "database restarting",  # crash_shutdown
    "57P03": "database restarting",  # cannot_connect_now: starting up / shutting down
    "53300": "too many connections",
    "08000": "connection lost",
    "08003": "connection lost",
    "08006": "connection lost",
    "08001": "connection lost",
    "08004": "connection lost",
}
# SQLSTATE classes that no retry fixes: a wrong password or database name, bad SQL, bad data.
_PERMANENT_SQLSTATE_CLASSES = ("28", "3D", "42", "22", "23")

# libpq messages of a connection that is gone or not there yet (no SQLSTATE reaches the client).
_CONNECTION_LOST = (
    "server closed the connection unexpectedly",
    "connection already closed",
    "terminating connection",
    "could not connect to server",
    "connection refused",
    "connection to server at",
    "no connection to the server",
    "ssl syscall error",
    "could not receive data from server",
    "could not send data to server",
    "connection timed out",
    "timeout expired",
    "lost synchronization with server",
)
_RESTARTING = (
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "the database system is not yet accepting connections",
)
# Connection failures that the same attempt again will meet again.
_PERMANENT_CONNECT = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "permission denied",
    "authentication failed",
)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: `initial` * `factor` ** (attempt - 1), capped at `cap`, for at most
    `budget` seconds from the first failure (the last wait is cut to what the budget leaves)."""

    initial: float = 1.0
    factor: float = 2.0
    cap: float = DEFAULT_CAP_SECONDS
    budget: float = DEFAULT_BUDGET_SECONDS

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.factor < 1 or self.cap <= 0 or self.budget < 0:
            raise ValueError(f"invalid backoff {self!r}")

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number `attempt` (1 = the first failure), before the cap
        of the budget."""
        if attempt < 1:
            raise ValueError(f"attempt must be >= 1, got {attempt}")
        # no float overflow for large attempt numbers: past the cap the power is not needed
        exponent = attempt - 1
        if self.factor > 1 and exponent > 64:
            return self.cap
        return min(self.cap, self.initial * self.factor**exponent)

    def next_delay(self, attempt: int, elapsed: float, retry_after: float | None = None) -> float | None:
        """The wait before attempt `attempt` + 1, given `elapsed` seconds since the first failure;
        None when the budget is spent (give up). A server's Retry-After replaces the computed delay
        (still capped)."""
        remaining = self.budget - elapsed
        if remaining <= 0:
            return None
        wanted = self.delay(attempt) if retry_after is None else min(max(retry_after, 0.0), self.cap)
        return min(wanted, remaining)

    def schedule(self) -> Iterator[float]:
        """Every wait of a source that never recovers (attempts take no time): their sum is the budget."""
        elapsed, attempt = 0.0, 1
        while (wait := self.next_delay(attempt, elapsed)) is not None:
            yield wait
            elapsed += wait
            attempt += 1


def transient_reason(error: BaseException) -> str | None:
    """Why `error` is worth another attempt ("answered 503", "timeout", "connection lost",
    "deadlock", "database restarting", ...), or None when it is permanent (a 4xx other than 429,
    a wrong password, bad data, a bug).

    Looks through the whole cause chain: SQLAlchemy's wrapper (`.orig`), `__cause__` and
    `__context__`, so the driver's error decides whatever wraps it.
    """
    for e in _chain(error):
        status = _http_status(e)
        if status is not None:
            if status == 429:
                return "answered 429"
            if 500 <= status <= 599:
                return f"answered {status}"
            if 400 <= status <= 499:
                return None
        code = getattr(e, "pgcode", None) or getattr(e, "sqlstate", None)
        if isinstance(code, str) and code:
            if code in TRANSIENT_SQLSTATES:
                return TRANSIENT_SQLSTATES[code]
            if code.startswith(_PERMANENT_SQLSTATE_CLASSES):
                return None
            if code.startswith("08"):
                return "connection lost"
        reason = _by_message(e)
        if reason is not None:
            return reason or None
        if getattr(e, "connection_invalidated", False):
            return "connection lost"
        if _is_timeout(e):
            return "timeout"
        if isinstance(e, ConnectionError | socket.gaierror):
            return "connection lost"
        name = type(e).__name__
        if name in ("ConnectTimeout", "ReadTimeout", "Timeout", "TalentTimeout"):
            return "timeout"
        if name in ("ConnectionError", "ChunkedEncodingError", "DisconnectionError", "ProtocolError"):
            return "connection lost"
        if name == "TalentTransientError":  # the client's own retries ran out on a transient answer
            return "timeout" if "timed out" in str(e) else "source error"
    return None


def is_transient(error: BaseException) -> bool:
    return transient_reason(error) is not None


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    stack = [error]
    while stack:
        e = stack.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        for nxt in (getattr(e, "orig", None), e.__cause__, e.__context__):
            if isinstance(nxt, BaseException):
                stack.append(nxt)


def _http_status(error: BaseException) -> int | None:
    for holder in (error, getattr(error, "response", None)):
        for name in ("status", "status_code"):
            value = getattr(holder, name, None)
            if isinstance(value, int) and 100 <= value <= 599:
                return value
    return None


def _is_timeout(error: BaseException) -> bool:
    return isinstance(error, TimeoutError) or type(error).__name__.endswith("Timeout")


def _by_message(error: BaseException) -> str | None:
    """ "" = permanent by its message, None = the message says nothing, else the reason.
    Only driver errors (psycopg2 / libpq) are read by message."""
    module = type(error).__module__ or ""
    if not module.startswith(("psycopg2", "sqlalchemy")):
        return None
    text = str(error).lower()
    if any(m in text for m in _RESTARTING):
        return "database restarting"
    if any(m in text for m in _PERMANENT_CONNECT):
        return ""
    if any(m in text for m in _CONNECTION_LOST):
        return "connection lost"
    return None


class RetryStopped(Exception):
    """should_stop() asked to give up while waiting for a retry."""


class Retrier:
    """Runs store operations again after transient failures, with backoff, until the budget (from
    the first failure of the current streak) is spent; then the last error is raised."""

    def __init__(
        self,
        budget_seconds: float,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        initial_seconds: float = 0.5,
        fields: Callable[[], dict[str, Any]] = dict,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff = Backoff(initial=initial_seconds, budget=budget_seconds)
        self.should_stop = should_stop
        self.fields = fields
        self._sleep = sleep
        self._clock = clock

    def __call__(self, what: str, operation: Callable[[], T]) -> T:
        first_failure: float | None = None
        attempt = 0
        while True:
            try:
                return operation()
            except Exception as error:
                reason = transient_reason(error)
                if reason is None:
                    raise
                now = self._clock()
                first_failure = now if first_failure is None else first_failure
                attempt += 1
                wait = self.backoff.next_delay(attempt, now - first_failure)
                if wait is None or self.should_stop():
                    raise
                log_event(
                    log,
                    logging.WARNING,
                    "retry",
                    **self.fields(),
                    What=what,
                    Reason=reason,
                    Attempt=attempt,
                    WaitSeconds=f"{wait:.1f}",
                    Error=repr(error_line(error)),
                )
                self.wait(wait)

    def wait(self, seconds: float) -> None:
        deadline = self._clock() + seconds
        while (left := deadline - self._clock()) > 0:
            if self.should_stop():
                raise RetryStopped("stopped while waiting to retry")
            self._sleep(min(0.1, left))

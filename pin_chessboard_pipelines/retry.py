"""The failure toolkit: one way for every loop (page worker, drain, relay, syncs) to stop, wait,
retry and give up.

- `StopReason`, `Stopper` (stopper.py): why a loop stopped, its stop flag and the one
  interruptible sleep of the project.
- `FailurePolicy.decide(error, attempt, elapsed) -> RetryDecision`: retry-or-give-up. Transient
  errors (5xx, 429, timeout, connection loss, deadlock, the database restarting; talent-source.md,
  "Changes of v1.1") back off exponentially, capped at 60 s, for up to `budget_seconds` from the
  first failure (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS, default 600); other errors get `attempts`
  attempts; the `permanent` types give up at once.
- `Retrier`: runs an operation again under a policy, sleeping through a `Stopper`, logging every
  wait with what it waits for.

Backoff, the classification and the policy are pure (no I/O, no clock).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
import sqlalchemy.exc
import urllib3.exceptions

from pin_chessboard_pipelines.errors import (
    Refused,
    RetryStopped,
    TalentTooSlow,
    TalentTransientError,
    error_line,
)
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.stopper import Stopper

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_CAP_SECONDS = 60.0
DEFAULT_BUDGET_SECONDS = 600.0

# SQLSTATEs of a failure that a new attempt can get past (PostgreSQL, appendix A).
TRANSIENT_SQLSTATES: dict[str, str] = {
    "40P01": "deadlock",
    "40001": "serialization-failure",
    "55P03": "lock-not-available",
    "57P01": "database-restarting",  # admin_shutdown: terminating connection
    "57P02": "database-restarting",  # crash_shutdown
    "57P03": "database-restarting",  # cannot_connect_now: starting up / shutting down
    "53300": "too-many-connections",
    "08000": "connection-lost",
    "08003": "connection-lost",
    "08006": "connection-lost",
    "08001": "connection-lost",
    "08004": "connection-lost",
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
# Errors of a request or a connection that took too long, and of a connection that broke.
_TIMEOUTS = (TimeoutError, requests.exceptions.Timeout, TalentTooSlow)
_CONNECTION_LOST_TYPES = (
    ConnectionError,
    socket.gaierror,
    requests.exceptions.ConnectionError,
    requests.exceptions.ChunkedEncodingError,
    sqlalchemy.exc.DisconnectionError,
    urllib3.exceptions.ProtocolError,
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
    """Why `error` is worth another attempt ("http-503", "http-429", "timeout",
    "connection-lost", "deadlock", "database-restarting", ...: kebab-case, a log field's value), or None when it is permanent (a 4xx other than 429,
    a wrong password, bad data, a bug).

    Looks through the whole cause chain: SQLAlchemy's wrapper (`.orig`), `__cause__` and
    `__context__`, so the driver's error decides whatever wraps it. An error with a `retry_reason`
    attribute (e.g. the relay's failed deliveries) is transient for that reason.
    """
    for e in error_chain(error):
        declared = getattr(e, "retry_reason", None)  # an error of the project's own that says why
        if isinstance(declared, str) and declared:
            return declared
        status = _http_status(e)
        if status is not None:
            if status == 429:
                return "http-429"
            if 500 <= status <= 599:
                return f"http-{status}"
            if 400 <= status <= 499:
                return None
        code = getattr(e, "pgcode", None) or getattr(e, "sqlstate", None)
        if isinstance(code, str) and code:
            if code in TRANSIENT_SQLSTATES:
                return TRANSIENT_SQLSTATES[code]
            if code.startswith(_PERMANENT_SQLSTATE_CLASSES):
                return None
            if code.startswith("08"):
                return "connection-lost"
        reason = _by_message(e)
        if reason is not None:
            return reason or None
        if getattr(e, "connection_invalidated", False):
            return "connection-lost"
        if isinstance(e, _TIMEOUTS):
            return "timeout"
        if isinstance(e, _CONNECTION_LOST_TYPES):
            return "connection-lost"
        if isinstance(e, TalentTransientError):  # the client's own retries ran out on a transient answer
            return "timeout" if e.timed_out else "source-error"
    return None


def retry_after(error: BaseException) -> float | None:
    """The seconds a server asked to wait (an HTTP Retry-After carried as `retry_after` by the
    error or one of its causes), or None."""
    for e in error_chain(error):
        value = getattr(e, "retry_after", None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def error_chain(error: BaseException) -> Iterator[BaseException]:
    """`error`, then what it wraps (a DBAPI error's `orig`, its cause and context), each once."""
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


def _by_message(error: BaseException) -> str | None:
    """ "" = permanent by its message, None = the message says nothing, else the reason.
    Only driver errors (psycopg2 / libpq) are read by message."""
    module = type(error).__module__ or ""
    if not module.startswith(("psycopg2", "sqlalchemy")):
        return None
    text = str(error).lower()
    if any(m in text for m in _RESTARTING):
        return "database-restarting"
    if any(m in text for m in _PERMANENT_CONNECT):
        return ""
    if any(m in text for m in _CONNECTION_LOST):
        return "connection-lost"
    return None


@dataclass(frozen=True)
class RetryDecision:
    """What to do after a failure: wait `wait` seconds and try again, or give up (wait None)."""

    wait: float | None  # seconds before the next attempt; None = give up
    reason: str  # the transient reason ("connection-lost", "http-503", ...) or "permanent"

    @property
    def give_up(self) -> bool:
        return self.wait is None


PERMANENT = "permanent"


@dataclass(frozen=True)
class FailurePolicy:
    """Retry-or-give-up for every loop: transient errors back off exponentially (initial, doubling,
    capped at cap) until budget_seconds since the first failure are spent; other errors get `attempts`
    attempts; errors in `permanent` (types) give up at once."""

    budget_seconds: float = DEFAULT_BUDGET_SECONDS
    initial: float = 1.0
    cap: float = DEFAULT_CAP_SECONDS
    attempts: int = 3
    permanent: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be >= 1, got {self.attempts}")
        Backoff(initial=self.initial, cap=self.cap, budget=self.budget_seconds)  # validates them

    @property
    def backoff(self) -> Backoff:
        return Backoff(initial=self.initial, cap=self.cap, budget=self.budget_seconds)

    def decide(self, error: BaseException, attempt: int, elapsed: float) -> RetryDecision:
        """After failed attempt number `attempt` (1 = the first failure of this work item),
        `elapsed` seconds after that first failure: how long to wait, or give up. A transient
        error's Retry-After replaces the computed wait (still capped, still within the budget)."""
        if isinstance(error, self.permanent):
            return RetryDecision(None, PERMANENT)
        backoff = self.backoff
        reason = transient_reason(error)
        if reason is not None:
            return RetryDecision(backoff.next_delay(attempt, elapsed, retry_after(error)), reason)
        if attempt >= self.attempts:
            return RetryDecision(None, PERMANENT)
        return RetryDecision(backoff.delay(attempt), PERMANENT)


def sync_policy(retry_seconds: float = 600.0, attempts: int = 5, initial: float = 0.5) -> FailurePolicy:
    """The failure policy of a consumer's poll batch (talent-sync, handbook-sync): transient
    failures (the store restarting, a connection lost) back off from `initial` for up to
    `retry_seconds` (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS, as the import); any other error gets
    `attempts` attempts; a refusal none."""
    return FailurePolicy(
        budget_seconds=retry_seconds, initial=initial, attempts=attempts, permanent=(Refused,)
    )


class FailureStreak:
    """The consecutive failures of one work item under `policy`: counts the attempts and the time
    since the first failure, for loops that wait in their own way (between passes, per batch)."""

    def __init__(self, policy: FailurePolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self._clock = clock
        self.attempt = 0
        self._first: float | None = None

    def decide(self, error: BaseException) -> RetryDecision:
        """One more failure: the policy's decision for it."""
        now = self._clock()
        self._first = now if self._first is None else self._first
        self.attempt += 1
        return self.policy.decide(error, self.attempt, now - self._first)

    @property
    def elapsed(self) -> float:
        """Seconds since the first failure of the streak (0 without one)."""
        return 0.0 if self._first is None else self._clock() - self._first

    def reset(self) -> None:
        """The work item succeeded: the next failure starts a new streak."""
        self.attempt = 0
        self._first = None


def wait_after_failure(
    streak: FailureStreak, error: BaseException, stopper: Stopper, event: str, logger: logging.Logger = log
) -> RetryDecision:
    """One more failure of `streak`: unless the policy gives up, logs the wait (log event
    `event`) and sleeps it through `stopper`. Returns the decision (`give_up`: nothing slept)."""
    decision = streak.decide(error)
    if decision.wait is not None:
        log_event(
            logger,
            logging.WARNING,
            event,
            Reason=decision.reason,
            Attempt=streak.attempt,
            WaitSeconds=f"{decision.wait:.1f}",
            Error=repr(error_line(error)),
        )
        stopper.sleep(decision.wait)
    return decision


class Retrier:
    """Runs an operation again after failures, as `policy` decides, sleeping through `stopper`
    and logging every wait; gives up by raising the last error (or RetryStopped when stopped
    before or while waiting). The streak (attempt count, first failure) is per call.

    `policy` may be a number: the transient budget in seconds of a policy that retries transient
    errors only (from 0.5 s) and raises any other error at once."""

    def __init__(
        self,
        policy: FailurePolicy | float,
        stopper: Stopper | None = None,
        *,
        should_stop: Callable[[], bool] | None = None,
        fields: Callable[[], dict[str, Any]] = dict,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(policy, FailurePolicy):
            policy = FailurePolicy(budget_seconds=float(policy), initial=0.5, attempts=1)
        self.policy = policy
        if stopper is None:
            stopper = Stopper.of(should_stop)
        elif should_stop is not None:
            stopper = Stopper(stopper, should_stop)
        self.stopper = stopper
        self.fields = fields
        self._clock = clock

    def __call__(self, what: str, operation: Callable[[], T]) -> T:
        streak = FailureStreak(self.policy, self._clock)
        while True:
            try:
                return operation()
            except Exception as error:  # noqa: BLE001 - the policy decides, whatever its type
                decision = streak.decide(error)
                if decision.wait is None:
                    raise
                if self.stopper.stopped():
                    raise RetryStopped(f"stopped instead of retrying: {error_line(error)}") from error
                log_event(
                    log,
                    logging.WARNING,
                    "retry",
                    **self.fields(),
                    What=what,
                    Reason=decision.reason,
                    Attempt=streak.attempt,
                    WaitSeconds=f"{decision.wait:.1f}",
                    Error=repr(error_line(error)),
                )
                self.wait(decision.wait)

    def wait(self, seconds: float) -> None:
        """Sleeps `seconds` through the stopper; RetryStopped when it says stop meanwhile."""
        if not self.stopper.sleep(seconds):
            raise RetryStopped("stopped while waiting to retry")

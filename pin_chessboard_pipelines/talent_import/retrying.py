"""Transient failures of the import's own work, retried within the page-retry budget
(docs/talent-initial-import.md#pages-and-leases): a database that restarts under a worker, a
deadlock, a Talent answer that does not come. Each wait is logged with what it waits for.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.retry import Backoff, transient_reason

log = logging.getLogger("pin_chessboard_pipelines.talent_import")

T = TypeVar("T")


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

"""How a loop stops: `StopReason` (why, an enum, never a bare string) and `Stopper`, one
interruptible stop flag per loop (probes + `stop()`) with the one interruptible sleep of the
project (`Stopper.sleep`)."""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Callable


class StopReason(enum.Enum):
    """Why a loop stopped; loops return and log these, never bare strings."""

    DONE = "done"  # the work is finished (queue empty with until_empty, barrier reached, idle)
    TIME_BUDGET = "time-budget"  # the loop's own time budget is spent
    LIFETIME = "lifetime"  # a long-lived worker's slot is over (the next run takes over)
    CANCELLED = "cancelled"  # terminate / Ctrl-C / a should_stop probe
    FAILED = "failed"  # gave up: a permanent error or the retry budget spent


class Stopper:
    """One interruptible stop flag for a loop: probes (callables returning True = stop) + stop().

    `sleep` is the project's one interruptible sleep: it wakes at once on `stop()` and notices a
    probe within `poll_seconds`. A Stopper is itself a probe (calling it = `stopped()`), so it can
    be handed to code that takes a `should_stop` callable or nested in another Stopper.
    """

    def __init__(
        self, *probes: Callable[[], bool] | None, deadline: float | None = None, poll_seconds: float = 0.05
    ) -> None:
        """Probes that are None are left out. `deadline`: a `time.monotonic()` instant at which the loop's time budget is spent (then
        stopped with TIME_BUDGET; `sleep` wakes at it)."""
        self._probes: list[Callable[[], bool]] = [p for p in probes if p is not None]
        self._deadline = deadline
        self._poll = poll_seconds
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._reason: StopReason | None = None

    @classmethod
    def of(cls, should_stop: Callable[[], bool] | None) -> Stopper:
        """`should_stop` itself when it is a Stopper, else a Stopper probing it (None = never)."""
        if isinstance(should_stop, Stopper):
            return should_stop
        return cls() if should_stop is None else cls(should_stop)

    def stop(self, reason: StopReason = StopReason.CANCELLED) -> None:
        """Asks the loop to stop; the first reason given stays."""
        with self._lock:
            if self._reason is None:
                self._reason = reason
        self._event.set()

    def stopped(self) -> bool:
        """True once stop() was called, the deadline passed (TIME_BUDGET) or a probe said so
        (CANCELLED); the answer is kept."""
        if self._event.is_set():
            return True
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.stop(StopReason.TIME_BUDGET)
            return True
        if any(probe() for probe in self._probes):
            self.stop(StopReason.CANCELLED)
            return True
        return False

    __call__ = stopped

    @property
    def reason(self) -> StopReason | None:
        return self._reason

    def sleep(self, seconds: float) -> bool:
        """Sleeps up to `seconds`, waking at once on stop(); True if NOT stopped."""
        deadline = time.monotonic() + max(seconds, 0.0)
        if self._deadline is not None:
            deadline = min(deadline, self._deadline)
        while not self.stopped():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self._event.wait(min(left, self._poll) if self._probes else left)
        return False

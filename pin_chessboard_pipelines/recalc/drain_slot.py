"""The long-lived drain of a recalc run's time slot (docs/project-aggregates-recalc.md#drain):
`drain_until`, a `drain` pass (recalc/drain.py) whenever a row is due, sleeping in between until
the next DueAt, until the slot ends or the run is stopped.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.recalc import queue
from pin_chessboard_pipelines.recalc.drain import NO_STORE_RETRY, DrainResult, drain
from pin_chessboard_pipelines.recalc.drain_timing import poll_wait
from pin_chessboard_pipelines.retry import FailurePolicy, transient_reason
from pin_chessboard_pipelines.stopper import Stopper, StopReason
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache

log = logging.getLogger(__name__)

# The shortest first pass of a long-lived drain, however late its run started.
FIRST_PASS_SECONDS = 25.0
# A project that failed waits one worker tick before its next attempt
# (docs/project-aggregates-recalc.md#poison-rows).
FAILED_PROJECT_WAIT_SECONDS = 5.0


def drain_until(
    engine: Engine,
    *,
    ends_at: float,
    poll_seconds: float,
    batch_size: int = 50,
    poison_attempts: int = 5,
    should_stop: Callable[[], bool] | None = None,
    correlation_id: str | None = None,
    logger: logging.Logger | logging.LoggerAdapter = log,
    run_log: Any = None,
    after_pass: Callable[[DrainResult], None] | None = None,
    policy: FailurePolicy = NO_STORE_RETRY,
    clock: Callable[[], float] = time.time,
) -> DrainResult:
    """The long-lived drain (docs/project-aggregates-recalc.md#drain): a pass of `drain` whenever a
    row is due, sleeping in between until the next DueAt (at most `poll_seconds`), until `ends_at`
    (Unix time; then stopped = LIFETIME) or `should_stop()` (CANCELLED). A failed project waits
    FAILED_PROJECT_WAIT_SECONDS before its next attempt; a store that is away is looked at again
    every poll until the slot ends. `after_pass` gets each pass that did something (the outbox
    fast path); `clock` is the slot's time (Unix seconds)."""
    slot = _Slot(
        engine, ends_at, poll_seconds, poison_attempts, Stopper.of(should_stop), run_log or logger, clock
    )
    pass_options: dict[str, Any] = dict(
        batch_size=batch_size,
        poison_attempts=poison_attempts,
        should_stop=slot.stopper,
        correlation_id=correlation_id or str(uuid.uuid4()),
        logger=logger,
        run_log=run_log,
        policy=policy,
    )
    handbooks = HandbookCache()  # the slot's, read again in a project's transaction after a rename
    first = True  # a first pass is made even when the run starts after `ends_at`
    while not slot.stopper.stopped() and (first or clock() < ends_at):
        try:
            # a run that started late (a loaded machine) still drains what is due once
            budget = max(ends_at - clock(), FIRST_PASS_SECONDS if first else 0.0)
            result = drain(
                engine,
                time_budget_seconds=budget,
                handbooks=handbooks,
                **pass_options,
                exclude=slot.waiting(),
            )
            due_in = slot.next_due_in()
        except Exception as error:  # noqa: BLE001 - a transient one is ridden out, any other raised
            if not slot.store_away(error):
                raise
            first = False
            continue
        first = False
        slot.passed(result, after_pass)
        if not slot.sleep_until_due(due_in):
            break
    slot.total.stopped = StopReason.CANCELLED if slot.stopper.stopped() else StopReason.LIFETIME
    return slot.total


@dataclass
class _Slot:
    """The long-lived drain's state between passes: the failed projects' waits, the total."""

    engine: Engine
    ends_at: float
    poll_seconds: float
    poison_attempts: int
    stopper: Stopper
    run_log: Any
    clock: Callable[[], float] = time.time
    total: DrainResult = field(default_factory=lambda: DrainResult(stopped=StopReason.LIFETIME))
    retry_at: dict[UUID, float] = field(default_factory=dict)  # failed project -> when it may be tried again

    def waiting(self) -> frozenset[UUID]:
        now = self.clock()
        self.retry_at = {p: t for p, t in self.retry_at.items() if t > now}
        return frozenset(self.retry_at)

    def next_due_in(self) -> float | None:
        with self.engine.connect() as conn:
            return queue.next_due_in(conn, self.poison_attempts, exclude=self.waiting())

    def passed(self, result: DrainResult, after_pass: Callable[[DrainResult], None] | None) -> None:
        if not (result.processed or result.failed):
            return
        self.total.add(result)
        retry_at = self.clock() + FAILED_PROJECT_WAIT_SECONDS
        self.retry_at.update({p: retry_at for p in result.failed_ids})
        if after_pass is not None:
            after_pass(result)

    def sleep_until_due(self, due_in: float | None) -> bool:
        """Sleeps until the next DueAt (at most a poll); False when the slot is over or stopped."""
        wait = poll_wait(self.clock(), self.ends_at, due_in, self.poll_seconds)
        return wait is not None and self.stopper.sleep(wait)

    def store_away(self, error: BaseException) -> bool:
        """A pass failed outside a project: True (after a poll's sleep) when the store is away for a
        transient reason, which the slot rides out; False for any other error."""
        reason = transient_reason(error)
        if reason is None:
            return False
        log_event(
            self.run_log,
            logging.WARNING,
            "recalc_drain_store_unavailable",
            Reason=reason,
            WaitSeconds=f"{self.poll_seconds:.1f}",
            Error=repr(error_line(error)),
        )
        self.stopper.sleep(self.poll_seconds)
        return True

"""The drain of the recalc queue (docs/project-aggregates-recalc.md#drain): the loop the Dagster job
and the CLI run. It owns the loop only: the queue's SQL is recalc/queue.py's, one project's
transaction recalc/project.py's, waiting and giving up the failure toolkit's (retry.py).

`drain`: batches of due rows, oldest DueAt first, each batch in one transaction (a batch that fails:
each of its projects in its own); the stopper (stop request, time budget) is asked once per project
a batch takes, a batch is never cut in half.
The long-lived drain of a run's time slot is recalc/drain_slot.py's.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import RetryStopped
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.recalc import queue
from pin_chessboard_pipelines.recalc.batch import process_batch
from pin_chessboard_pipelines.recalc.project import (
    REPUBLISHED,
    ProjectContext,
    ProjectOutcome,
    Result,
    process_project,
)
from pin_chessboard_pipelines.retry import FailurePolicy, Retrier
from pin_chessboard_pipelines.stopper import Stopper, StopReason
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache

__all__ = ["NO_STORE_RETRY", "REPUBLISHED", "DrainResult", "drain", "store_policy"]

log = logging.getLogger(__name__)

# By default a store that fails ends the drain at once (the next run tries again).
NO_STORE_RETRY = FailurePolicy(budget_seconds=0.0, attempts=1)


def store_policy(retry_seconds: float) -> FailurePolicy:
    """The drain's failure policy: a store that fails transiently (restarting, connection lost) is
    waited for with backoff for `retry_seconds` (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS); any other
    error of a store operation ends the drain."""
    return FailurePolicy(budget_seconds=retry_seconds, initial=0.5, attempts=1)


@dataclass
class DrainResult:
    recalculated: int = 0
    skipped_archived: int = 0
    failed: int = 0
    taken_elsewhere: int = 0
    coalesced_events: int = 0
    batches: int = 0
    republished: Counter = field(default_factory=Counter)
    buildings_changed: int = 0
    poisoned: list[UUID] = field(default_factory=list)
    failed_ids: list[UUID] = field(default_factory=list)
    transient_ids: set[UUID] = field(default_factory=set)  # failed for the store's sake (retried)
    durations: list[float] = field(default_factory=list)  # per recalculated project, seconds
    lags: list[float] = field(default_factory=list)  # first request -> commit, seconds
    # DONE: no due row left; FAILED: rows that failed in this drain are left
    stopped: StopReason = StopReason.DONE
    duration_seconds: float = 0.0  # time spent draining (a long-lived drain's sleeps left out)
    passes: int = 0  # passes over the due rows (a long-lived drain makes one per wake-up)

    @property
    def processed(self) -> int:
        return self.recalculated + self.skipped_archived

    @property
    def projects_per_second(self) -> float:
        return self.processed / self.duration_seconds if self.duration_seconds > 0 else 0.0

    def count(self, outcome: ProjectOutcome) -> None:
        """Adds one project's outcome."""
        if outcome.result is Result.TAKEN:
            self.taken_elsewhere += 1
            return
        self.coalesced_events += outcome.coalesced
        if outcome.result is Result.RECALCULATED:
            self.recalculated += 1
            self.durations.append(outcome.duration_seconds)
            if outcome.lag_seconds is not None:
                self.lags.append(outcome.lag_seconds)
            self.republished.update({k: v for k, v in outcome.republished.items() if v})
            self.buildings_changed += outcome.buildings_changed
        elif outcome.result is Result.SKIPPED_ARCHIVED:
            self.skipped_archived += 1
        else:
            self.failed += 1
            self.failed_ids.append(outcome.project_id)
            if outcome.transient:
                self.transient_ids.add(outcome.project_id)
            if outcome.poisoned:
                self.poisoned.append(outcome.project_id)

    def add(self, other: DrainResult) -> None:
        """Adds one pass's counters to these (the long-lived drain's total)."""
        self.recalculated += other.recalculated
        self.skipped_archived += other.skipped_archived
        self.failed += other.failed
        self.taken_elsewhere += other.taken_elsewhere
        self.coalesced_events += other.coalesced_events
        self.batches += other.batches
        self.republished.update(other.republished)
        self.buildings_changed += other.buildings_changed
        self.poisoned.extend(other.poisoned)
        self.failed_ids.extend(other.failed_ids)
        self.durations.extend(other.durations)
        self.lags.extend(other.lags)
        self.duration_seconds += other.duration_seconds
        self.passes += other.passes

    def summary(self) -> dict[str, Any]:
        """Counters for run metadata, logs and the CLI's last line."""
        return {
            "recalculated": self.recalculated,
            "skippedArchived": self.skipped_archived,
            "failed": self.failed,
            "poisoned": len(self.poisoned),
            "coalescedEvents": self.coalesced_events,
            "batches": self.batches,
            "republished": {entity: self.republished.get(entity, 0) for entity in REPUBLISHED},
            "buildingsChanged": self.buildings_changed,
            "stopped": self.stopped.value,
            "passes": self.passes,
            "durationSeconds": round(self.duration_seconds, 3),
            "projectsPerSecond": round(self.projects_per_second, 1),
        }


def _drain_started(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tracing.Attributes:
    # the drain's log lines and its span carry the same correlation id
    kwargs["correlation_id"] = kwargs.get("correlation_id") or str(uuid.uuid4())
    return {"pin.correlation_id": kwargs["correlation_id"]}


def _drain_ended(span: Any, result: DrainResult) -> None:
    span.set_attributes(
        {
            "pin.recalc.recalculated": result.recalculated,
            "pin.recalc.skipped_archived": result.skipped_archived,
            "pin.recalc.failed": result.failed,
            "pin.recalc.batches": result.batches,
            "pin.recalc.stopped": result.stopped.value,
        }
    )


# a span per drain, the projects' spans under it (README "Traces")
@tracing.traced("recalc.drain", _drain_started, _drain_ended)
def drain(
    engine: Engine,
    *,
    batch_size: int = 50,
    poison_attempts: int = 5,
    time_budget_seconds: float | None = None,
    should_stop: Callable[[], bool] | None = None,
    correlation_id: str | None = None,
    handbooks: HandbookCache | None = None,
    logger: logging.Logger | logging.LoggerAdapter = log,
    run_log: Any = None,
    exclude: frozenset[UUID] = frozenset(),
    policy: FailurePolicy = NO_STORE_RETRY,
    one_transaction_per_project: bool = False,
) -> DrainResult:
    """Drains due rows until none is left (rows that failed in this drain, and those in `exclude`,
    wait for the next one), the time budget is spent, or `should_stop()` says so.

    `policy` (see `store_policy`): how long a store that fails transiently is waited for; the
    projects that failed meanwhile are then tried again. `stopped` is DONE only when no due row is
    left, FAILED when rows that failed in this drain remain.

    `logger` gets the per-project lines; `run_log` (default: `logger`) the batch lines, failures
    and poison alerts, e.g. a Dagster run's log, which stores each line as an event.

    A batch is one transaction (recalc/batch.py); `one_transaction_per_project` does each project
    in its own instead (what a batch that fails falls back to; the benchmark's baseline).
    """
    started = time.monotonic()
    deadline = None if time_budget_seconds is None else started + time_budget_seconds
    stopper = Stopper(should_stop, deadline=deadline)
    loop = _DrainLoop(
        engine, batch_size, policy, stopper, run_log or logger, exclude, one_transaction_per_project
    )
    try:
        ctx = ProjectContext(
            poison_attempts=poison_attempts,
            # each project's transaction reads it under HANDBOOK_CHANGE_LOCK (re-read after a rename)
            handbooks=HandbookCache() if handbooks is None else handbooks,
            correlation_id=correlation_id or str(uuid.uuid4()),
            logger=logger,
            alerts=run_log,
        )
        loop.run(ctx)
    except RetryStopped:
        loop.result.stopped = stopper.reason or StopReason.CANCELLED
    finally:
        loop.result.duration_seconds = time.monotonic() - started
    return loop.result


@dataclass
class _DrainLoop:
    """One `drain` call's state: the rows that failed in it, the store's retry rounds."""

    engine: Engine
    batch_size: int
    policy: FailurePolicy
    stopper: Stopper
    run_log: Any
    exclude: frozenset[UUID]
    per_project: bool = False
    result: DrainResult = field(init=False, default_factory=lambda: DrainResult(passes=1))
    failed_here: set[UUID] = field(init=False, default_factory=set)
    first_store_failure: float | None = field(init=False, default=None)
    store_rounds: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.retrier = Retrier(self.policy, self.stopper)

    def run(self, ctx: ProjectContext) -> None:
        while not self.stopper.stopped():
            if self.per_project:
                batch = self.retrier("select due recalc rows", lambda: self._due_batch(ctx.poison_attempts))
                if batch:
                    self._process(batch, ctx)
                    continue
            else:
                limit = self._batch_limit()
                if limit == 0:
                    break
                outcomes = self.retrier("recalc a batch", functools.partial(self._batch, ctx, limit))
                if outcomes:
                    for outcome in outcomes:
                        self._count(outcome)
                    continue
            if not self._wait_for_store():
                return
        self.result.stopped = self.stopper.reason or StopReason.CANCELLED

    def _batch_limit(self) -> int:
        """How many rows the next batch takes: the stopper is asked once per project, as between
        the projects of a batch done one by one (a stop request takes effect at the same project)."""
        limit = 0
        while limit < self.batch_size and not self.stopper.stopped():
            limit += 1
        return limit

    def _batch(self, ctx: ProjectContext, limit: int) -> list[ProjectOutcome]:
        with self.engine.connect() as conn:
            return process_batch(
                conn,
                ctx,
                limit=limit,
                exclude=self.failed_here | self.exclude,
                started=lambda size: self._started(size, ctx),
                should_stop=self.stopper.stopped,
            )

    def _started(self, size: int, ctx: ProjectContext) -> None:
        self.result.batches += 1
        log_event(
            self.run_log,
            logging.INFO,
            "recalc_batch_started",
            Size=size,
            Batch=self.result.batches,
            CorrelationId=ctx.correlation_id,
        )

    def _count(self, outcome: ProjectOutcome) -> None:
        self.result.count(outcome)
        if outcome.result is Result.FAILED:
            self.failed_here.add(outcome.project_id)

    def _due_batch(self, poison_attempts: int) -> list[UUID]:
        with self.engine.connect() as conn:
            return queue.select_due_batch(
                conn, self.batch_size, poison_attempts, self.failed_here | self.exclude
            )

    def _process(self, batch: list[UUID], ctx: ProjectContext) -> None:
        self._started(len(batch), ctx)
        with self.engine.connect() as conn:
            for project_id in batch:
                if self.stopper.stopped():
                    return
                self._count(process_project(conn, project_id, ctx))
                if conn.invalidated:  # the connection died: take a fresh one for the next batch
                    return

    def _wait_for_store(self) -> bool:
        """No due row is left but those that failed here: True after waiting for the store when
        they failed for its sake (they are tried again), False when the drain ends."""
        if not self.failed_here:
            self.result.stopped = StopReason.DONE
            return False
        retried = self.failed_here & self.result.transient_ids
        now = time.monotonic()
        self.first_store_failure = self.first_store_failure or now
        self.store_rounds += 1
        wait = self.policy.backoff.next_delay(self.store_rounds, now - self.first_store_failure)
        if not retried or wait is None:
            self.result.stopped = StopReason.FAILED  # honest: rows that failed in this drain are left
            return False
        log_event(
            self.run_log,
            logging.WARNING,
            "recalc_retry",
            Projects=len(retried),
            Round=self.store_rounds,
            WaitSeconds=f"{wait:.1f}",
        )
        self.retrier.wait(wait)
        self.failed_here -= retried
        self.result.transient_ids.clear()
        return True

"""The drain of the recalc queue (docs/project-aggregates-recalc.md): the loop the Dagster job and the CLI run.

Batches of due rows, oldest DueAt first; each project in its own transaction: claim the queue row
(FOR UPDATE SKIP LOCKED), recompute every aggregate with one set-based statement, write outbox
events for the changed project / layout / layout-group rows, delete the queue row, commit. A failed
project is rolled back alone and its AttemptCount/LastError are written in a separate transaction.
Between projects the loop checks `should_stop` and the time budget; a project is never cut in half.
"""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, ParamSpec
from uuid import UUID

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.errors import RECALC_POISON, error_line
from pin_chessboard_pipelines.events import payloads
from pin_chessboard_pipelines.events.outbox import OutboxEvent, write_outbox
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.observability import metrics, tracing
from pin_chessboard_pipelines.recalc.drain_timing import poll_wait
from pin_chessboard_pipelines.recalc.queue import next_due_in
from pin_chessboard_pipelines.retry import Backoff, Retrier, RetryStopped, transient_reason
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.store.queries import queries

log = logging.getLogger(__name__)

LAST_ERROR_MAX = 1024
# The shortest first pass of a long-lived drain, however late its run started.
FIRST_PASS_SECONDS = 25.0
# Lock conflicts with a concurrent writer (e.g. an import page that updates layouts and then
# enqueues this project) are retried at once and do not count as attempts.
TRANSIENT_SQLSTATES = frozenset({"40P01", "40001", "55P03"})
TRANSIENT_RETRIES = 3

# The entities the recalc republishes, by the label recalc_project returns (buildings never are).
_REPUBLISHED_ENTITIES: dict[str, Entity] = {
    "project": entities.PROJECT,
    "layout": entities.LAYOUT,
    "layout_group": entities.LAYOUT_GROUP,
}
REPUBLISHED = tuple(_REPUBLISHED_ENTITIES)
_TIMESTAMPS = ("created_at", "updated_at", "deleted_at", "last_synced_at")


@dataclass
class ProjectOutcome:
    project_id: UUID
    result: str  # recalculated | skipped_archived | failed | taken (by another drain)
    duration_seconds: float = 0.0
    coalesced: int = 0  # RequestedCount of the drained row
    republished: dict[str, int] = field(default_factory=dict)
    buildings_changed: int = 0
    lag_seconds: float | None = None
    attempt_count: int | None = None
    error: str | None = None
    poisoned: bool = False  # this failure made the row reach the poison threshold
    transient: bool = False  # the failure was the store's (restarting, connection lost): worth a retry


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
    # empty | budget | cancelled | lifetime | failed (rows that failed in this drain are left)
    stopped: str = "empty"
    duration_seconds: float = 0.0  # time spent draining (a long-lived drain's sleeps left out)
    passes: int = 0  # passes over the due rows (a long-lived drain makes one per wake-up)

    @property
    def processed(self) -> int:
        return self.recalculated + self.skipped_archived

    @property
    def projects_per_second(self) -> float:
        return self.processed / self.duration_seconds if self.duration_seconds > 0 else 0.0

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
            "stopped": self.stopped,
            "passes": self.passes,
            "durationSeconds": round(self.duration_seconds, 3),
            "projectsPerSecond": round(self.projects_per_second, 1),
        }


# -- traces (README "Traces"): a span per drain and, under it, one per project -----------------

P = ParamSpec("P")


def _traced_drain(fn: Callable[P, DrainResult]) -> Callable[P, DrainResult]:
    @functools.wraps(fn)
    def traced(*args: P.args, **kwargs: P.kwargs) -> DrainResult:
        if not tracing.tracing_enabled():
            return fn(*args, **kwargs)
        kwargs["correlation_id"] = kwargs.get("correlation_id") or str(uuid.uuid4())
        with tracing.span("recalc.drain", {"pin.correlation_id": kwargs["correlation_id"]}) as span:
            result = fn(*args, **kwargs)
            span.set_attributes(
                {
                    "pin.recalc.recalculated": result.recalculated,
                    "pin.recalc.skipped_archived": result.skipped_archived,
                    "pin.recalc.failed": result.failed,
                    "pin.recalc.batches": result.batches,
                    "pin.recalc.stopped": result.stopped,
                }
            )
            return result

    return traced


def _traced_project(fn: Callable[P, ProjectOutcome]) -> Callable[P, ProjectOutcome]:
    @functools.wraps(fn)
    def traced(*args: P.args, **kwargs: P.kwargs) -> ProjectOutcome:
        if not tracing.tracing_enabled():
            return fn(*args, **kwargs)
        project_id = args[1] if len(args) > 1 else kwargs.get("project_id")
        with tracing.span("recalc.project", {"pin.project.id": project_id}) as span:
            outcome = fn(*args, **kwargs)
            span.set_attributes({"pin.recalc.result": outcome.result})
            if outcome.error is not None:
                span.set_status(tracing.Status(tracing.StatusCode.ERROR, outcome.error[:200]))
            return outcome

    return traced


# -- the drain ---------------------------------------------------------------------------------


@_traced_drain
def drain(
    engine: Engine,
    *,
    batch_size: int = 50,
    poison_attempts: int = 5,
    time_budget_seconds: float | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    correlation_id: str | None = None,
    handbook: Handbook | None = None,
    logger: logging.Logger | logging.LoggerAdapter = log,
    run_log: Any = None,
    exclude: set[UUID] | frozenset[UUID] = frozenset(),
    retry_seconds: float = 0.0,
) -> DrainResult:
    """Drains due rows until none is left (rows that failed in this drain, and those in `exclude`,
    wait for the next one), the time budget is spent, or `should_stop()` says so. Returns what happened.

    `retry_seconds`: a store that fails transiently (restarting, connection lost) is waited for
    with backoff this long, and the projects that failed meanwhile are tried again; `stopped` is
    "empty" only when no due row is left, "failed" when rows that failed in this drain remain.

    `logger` gets the per-project lines; `run_log` (default: `logger`) the batch lines, failures
    and poison alerts, e.g. a Dagster run's log, which stores each line as an event.
    """
    run_log = run_log or logger
    correlation_id = correlation_id or str(uuid.uuid4())
    started = time.monotonic()
    deadline = None if time_budget_seconds is None else started + time_budget_seconds
    result = DrainResult(passes=1)
    failed_here: set[UUID] = set()
    excluded = set(exclude)
    retrying = Retrier(retry_seconds, should_stop=should_stop)
    backoff = Backoff(initial=0.5, budget=retry_seconds)
    first_failure: float | None = None
    retry_round = 0
    if handbook is None:

        def read_handbook() -> Handbook:
            with engine.connect() as conn:
                return load_handbook(conn)

        handbook = retrying("read the handbook", read_handbook)

    def stop_reason() -> str | None:
        if should_stop():
            return "cancelled"
        if deadline is not None and time.monotonic() >= deadline:
            return "budget"
        return None

    def due_batch() -> list[UUID]:
        with engine.connect() as conn:
            return select_due_batch(conn, batch_size, poison_attempts, failed_here | excluded)

    try:
        while (reason := stop_reason()) is None:
            batch = retrying("select due recalc rows", due_batch)
            if not batch:
                if not failed_here:
                    result.stopped = "empty"
                    break
                if not (failed_here & result.transient_ids):
                    result.stopped = "failed"  # honest: rows that failed in this drain are left
                    break
                # rows failed while the store was away: try them again within the retry budget
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                retry_round += 1
                wait = backoff.next_delay(retry_round, now - first_failure)
                if wait is None:
                    result.stopped = "failed"  # honest: due rows are left
                    break
                run_log.warning(
                    "recalc_retry Projects=%d Round=%d WaitSeconds=%.1f", len(failed_here), retry_round, wait
                )
                retrying.wait(wait)
                failed_here -= result.transient_ids
                result.transient_ids.clear()
                continue
            with engine.connect() as conn:
                result.batches += 1
                run_log.info(
                    "recalc_batch_started Size=%d Batch=%d CorrelationId=%s",
                    len(batch),
                    result.batches,
                    correlation_id,
                )
                for project_id in batch:
                    if (reason := stop_reason()) is not None:
                        break
                    outcome = process_project(
                        conn,
                        project_id,
                        poison_attempts=poison_attempts,
                        handbook=handbook,
                        correlation_id=correlation_id,
                        logger=logger,
                        alerts=run_log,
                    )
                    _count(result, outcome, failed_here)
                    if conn.invalidated:  # the connection died: take a fresh one for the next batch
                        break
            if reason is not None:
                break
        if reason is not None:
            result.stopped = reason
    except RetryStopped:
        result.stopped = "cancelled"
    finally:
        result.duration_seconds = time.monotonic() - started
    return result


def drain_until(
    engine: Engine,
    *,
    ends_at: float,
    poll_seconds: float,
    retry_seconds: float = 5.0,
    batch_size: int = 50,
    poison_attempts: int = 5,
    should_stop: Callable[[], bool] = lambda: False,
    correlation_id: str | None = None,
    logger: logging.Logger | logging.LoggerAdapter = log,
    run_log: Any = None,
    after_pass: Callable[[DrainResult], None] | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> DrainResult:
    """The long-lived drain (docs/project-aggregates-recalc.md#drain): a pass of `drain` whenever a
    row is due, sleeping in between until the next DueAt (at most `poll_seconds`), until `ends_at`
    (Unix time) or `should_stop()`. A failed project waits `retry_seconds` (one 5 s tick)
    before its next attempt; `after_pass` gets each pass that did something (the outbox fast path).
    """
    run_log = run_log or logger
    correlation_id = correlation_id or str(uuid.uuid4())
    total = DrainResult(stopped="lifetime")
    backoff: dict[UUID, float] = {}  # project -> when it may be tried again
    with engine.connect() as conn:
        handbook = load_handbook(conn)
    looked = False  # a first pass is made even when the run starts after `ends_at`
    while True:
        now = clock()
        backoff = {p: t for p, t in backoff.items() if t > now}
        if should_stop():
            total.stopped = "cancelled"
            break
        first = not looked
        if now >= ends_at and not first:
            break
        try:
            result = drain(
                engine,
                batch_size=batch_size,
                poison_attempts=poison_attempts,
                # a run that started late (a loaded machine) still drains what is due once
                time_budget_seconds=max(ends_at - now, FIRST_PASS_SECONDS if first else 0.0),
                should_stop=should_stop,
                correlation_id=correlation_id,
                handbook=handbook,
                logger=logger,
                run_log=run_log,
                exclude=frozenset(backoff),
            )
            with engine.connect() as conn:
                due_in = next_due_in(conn, poison_attempts, exclude=frozenset(backoff))
            looked = True
        except DBAPIError as error:  # the store is unreachable: keep the run, look again after a poll
            run_log.warning("recalc_drain_store_unavailable Error=%s", error_line(error, LAST_ERROR_MAX))
            looked = True
            sleep(poll_seconds)
            continue
        if result.processed or result.failed:
            total.add(result)
            retry_at = clock() + retry_seconds
            backoff.update({p: retry_at for p in result.failed_ids})
            if after_pass is not None:
                after_pass(result)
        if result.stopped == "cancelled":
            total.stopped = "cancelled"
            break
        wait = poll_wait(clock(), ends_at, due_in, poll_seconds)
        if wait is None:
            break
        if wait > 0:
            sleep(wait)
    return total


def select_due_batch(
    conn: Connection, batch_size: int, poison_attempts: int, exclude: set[UUID] | frozenset = frozenset()
) -> list[UUID]:
    with conn.begin():
        rows = conn.execute(
            queries("recalc")["select_due_batch"],
            {
                "batch_size": batch_size,
                "poison_attempts": poison_attempts,
                "exclude": [str(p) for p in exclude],
            },
        ).scalars()
        return [p if isinstance(p, UUID) else UUID(str(p)) for p in rows]


@_traced_project
def process_project(
    conn: Connection,
    project_id: UUID,
    *,
    poison_attempts: int,
    handbook: Handbook,
    correlation_id: str,
    logger: logging.Logger | logging.LoggerAdapter = log,
    alerts: Any = None,
) -> ProjectOutcome:
    """One project = one transaction; a failure is rolled back and booked separately."""
    alerts = alerts or logger
    started = time.perf_counter()
    for attempt in range(TRANSIENT_RETRIES + 1):
        try:
            outcome = _recalc_in_transaction(conn, project_id, poison_attempts, handbook, correlation_id)
            break
        except DBAPIError as error:
            if _is_transient(error) and attempt < TRANSIENT_RETRIES and not conn.invalidated:
                logger.info("project_recalc_retry ProjectId=%s SqlState=%s", project_id, _sqlstate(error))
                continue
            return _book_failure(conn, project_id, error, started, poison_attempts, logger, alerts)
        except Exception as error:  # noqa: BLE001 - any failure of one project must not stop the batch
            return _book_failure(conn, project_id, error, started, poison_attempts, logger, alerts)
    outcome.duration_seconds = time.perf_counter() - started
    if outcome.lag_seconds is not None:
        outcome.lag_seconds += outcome.duration_seconds
    _observe(outcome, logger, alerts)
    return outcome


def _recalc_in_transaction(
    conn: Connection, project_id: UUID, poison_attempts: int, handbook: Handbook, correlation_id: str
) -> ProjectOutcome:
    q = queries("recalc")
    params = {"project_id": str(project_id), "poison_attempts": poison_attempts}
    with conn.begin():
        claim = conn.execute(q["claim_project"], params).mappings().first()
        if claim is None:
            return ProjectOutcome(project_id, "taken")
        coalesced = int(claim["requested_count"])
        tracing.set_attributes(
            {"pin.tenant.id": claim["tenant_id"], "pin.recalc.last_reason": claim["last_reason"]}
        )
        if not claim["live"]:
            conn.execute(q["dequeue_project"], params)
            return ProjectOutcome(project_id, "skipped_archived", coalesced=coalesced)
        rows = conn.execute(q["recalc_project"], params).all()
        events: list[OutboxEvent] = []
        republished: Counter = Counter()
        buildings_changed = 0
        for entity, text in rows:
            if entity == "building":
                buildings_changed = int(text)
            elif entity == "dequeued":
                continue
            else:
                events.append(_event(entity, parse_row(text), handbook, correlation_id))
                republished[entity] += 1
        write_outbox(conn, events)
    return ProjectOutcome(
        project_id,
        "recalculated",
        coalesced=coalesced,
        republished={e: republished.get(e, 0) for e in REPUBLISHED},
        buildings_changed=buildings_changed,
        lag_seconds=float(claim["waited_seconds"]),
    )


def parse_row(text: str) -> dict[str, Any]:
    """A row returned as JSON by recalc_project: numerics stay Decimal, timestamps datetime."""
    row = json.loads(text, parse_float=Decimal)
    for name in _TIMESTAMPS:
        if isinstance(row.get(name), str):
            row[name] = datetime.fromisoformat(row[name])
    return row


def _event(label: str, row: dict[str, Any], handbook: Handbook, correlation_id: str) -> OutboxEvent:
    entity = _REPUBLISHED_ENTITIES[label]
    payload = payloads.UPSERTED_PAYLOADS[entity.name](row, handbook)
    return OutboxEvent(entity.upserted_event, str(row["id"]), payload, correlation_id)


def _book_failure(
    conn: Connection,
    project_id: UUID,
    error: BaseException,
    started: float,
    poison_attempts: int,
    logger: logging.Logger | logging.LoggerAdapter,
    alerts: Any,
) -> ProjectOutcome:
    """AttemptCount += 1 and LastError in a transaction of their own; DueAt stays."""
    message = error_line(error, LAST_ERROR_MAX)
    attempt_count: int | None = None
    try:
        if conn.invalidated:
            conn.rollback()
        with conn.begin():
            attempt_count = conn.execute(
                queries("recalc")["record_failure"],
                {"project_id": str(project_id), "error": message[:LAST_ERROR_MAX]},
            ).scalar()
    except Exception as booking_error:  # noqa: BLE001 - the store is down: the row simply stays
        alerts.error("project_recalc_failure_not_recorded ProjectId=%s Error=%s", project_id, booking_error)
    outcome = ProjectOutcome(
        project_id,
        "failed",
        duration_seconds=time.perf_counter() - started,
        attempt_count=attempt_count,
        error=message,
        poisoned=attempt_count is not None and attempt_count >= poison_attempts,
        transient=transient_reason(error) is not None,
    )
    _observe(outcome, logger, alerts)
    return outcome


def _observe(outcome: ProjectOutcome, logger: logging.Logger | logging.LoggerAdapter, alerts: Any) -> None:
    """The logs and metrics of one project (docs/project-aggregates-recalc.md#metrics-logs-and-alerts)."""
    if outcome.result == "taken":
        return
    metrics.RECALC_COALESCED.inc(outcome.coalesced)
    if outcome.result == "recalculated":
        metrics.RECALC_RUNS.labels(result="success").inc()
        metrics.RECALC_PROCESS_DURATION.observe(outcome.duration_seconds)
        if outcome.lag_seconds is not None:
            metrics.RECALC_LAG.observe(outcome.lag_seconds)
        for entity in REPUBLISHED:
            if outcome.republished.get(entity):
                metrics.RECALC_REPUBLISHED.labels(entity=entity).inc(outcome.republished[entity])
        logger.info(
            "project_recalculated ProjectId=%s DurationMs=%.2f RepublishedProject=%d "
            "RepublishedLayout=%d RepublishedLayoutGroup=%d BuildingsChanged=%d Coalesced=%d",
            outcome.project_id,
            outcome.duration_seconds * 1000,
            outcome.republished.get("project", 0),
            outcome.republished.get("layout", 0),
            outcome.republished.get("layout_group", 0),
            outcome.buildings_changed,
            outcome.coalesced,
        )
    elif outcome.result == "skipped_archived":
        metrics.RECALC_RUNS.labels(result="skipped").inc()
        logger.info("project_skipped_archived ProjectId=%s", outcome.project_id)
    else:
        metrics.RECALC_RUNS.labels(result="error").inc()
        alerts.warning(
            "project_recalc_failed ProjectId=%s AttemptCount=%s Error=%s",
            outcome.project_id,
            outcome.attempt_count,
            outcome.error,
        )
        if outcome.poisoned:
            metrics.RECALC_POISON.inc()
            alerts.error(
                "%s ProjectId=%s AttemptCount=%d: the drain skips this row until "
                "`pin-chessboard recalc reset-poison --project-id %s`",
                RECALC_POISON,
                outcome.project_id,
                outcome.attempt_count,
                outcome.project_id,
            )


def _count(result: DrainResult, outcome: ProjectOutcome, failed_here: set[UUID]) -> None:
    if outcome.result == "taken":
        result.taken_elsewhere += 1
        return
    result.coalesced_events += outcome.coalesced
    if outcome.result == "recalculated":
        result.recalculated += 1
        result.durations.append(outcome.duration_seconds)
        if outcome.lag_seconds is not None:
            result.lags.append(outcome.lag_seconds)
        result.republished.update({k: v for k, v in outcome.republished.items() if v})
        result.buildings_changed += outcome.buildings_changed
    elif outcome.result == "skipped_archived":
        result.skipped_archived += 1
    else:
        result.failed += 1
        result.failed_ids.append(outcome.project_id)
        failed_here.add(outcome.project_id)
        if outcome.transient:
            result.transient_ids.add(outcome.project_id)
        if outcome.poisoned:
            result.poisoned.append(outcome.project_id)


def _is_transient(error: DBAPIError) -> bool:
    return _sqlstate(error) in TRANSIENT_SQLSTATES


def _sqlstate(error: DBAPIError) -> str | None:
    return getattr(error.orig, "pgcode", None)

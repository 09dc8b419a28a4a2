"""One project = one transaction (docs/project-aggregates-recalc.md#one-transaction-per-project):
claim the queue row, recompute every aggregate, write the outbox events of the changed rows,
commit; a failure is rolled back and booked in a transaction of its own. The SQL is the queue
manager's (recalc/queue.py); this module owns the transaction, the events, the logs and metrics.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.errors import RECALC_POISON, error_line
from pin_chessboard_pipelines.events import payloads
from pin_chessboard_pipelines.events.outbox import OutboxEvent, write_outbox
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.observability import metrics, tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.recalc import queue
from pin_chessboard_pipelines.recalc.queue import LAST_ERROR_MAX
from pin_chessboard_pipelines.retry import transient_reason
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache

log = logging.getLogger(__name__)

# Lock conflicts with a concurrent writer (e.g. an import page that updates layouts and then
# enqueues this project) are retried at once and do not count as attempts.
LOCK_CONFLICTS = frozenset({"deadlock", "serialization-failure", "lock-not-available"})
LOCK_CONFLICT_RETRIES = 3

# The entities the recalc republishes, by the label recompute_project returns (buildings never are).
_REPUBLISHED_ENTITIES: dict[str, Entity] = {
    "project": entities.PROJECT,
    "layout": entities.LAYOUT,
    "layout_group": entities.LAYOUT_GROUP,
}
REPUBLISHED = tuple(_REPUBLISHED_ENTITIES)
_TIMESTAMPS = ("created_at", "updated_at", "deleted_at", "last_synced_at")

Logger = logging.Logger | logging.LoggerAdapter


class Result(StrEnum):
    RECALCULATED = "recalculated"
    SKIPPED_ARCHIVED = "skipped_archived"
    FAILED = "failed"
    TAKEN = "taken"  # another drain holds or drained the row


@dataclass
class ProjectOutcome:
    project_id: UUID
    result: Result
    duration_seconds: float = 0.0
    coalesced: int = 0  # RequestedCount of the drained row
    republished: dict[str, int] = field(default_factory=dict)
    buildings_changed: int = 0
    lag_seconds: float | None = None
    attempt_count: int | None = None
    error: str | None = None
    poisoned: bool = False  # this failure made the row reach the poison threshold
    transient: bool = False  # the failure was the store's (restarting, connection lost): worth a retry


@dataclass(frozen=True)
class ProjectContext:
    """What every project of a drain shares."""

    poison_attempts: int
    handbooks: HandbookCache
    correlation_id: str
    logger: Logger = log  # the per-project lines
    alerts: Any = None  # failures and poison alerts (e.g. a Dagster run's log); None = `logger`

    @property
    def alert_log(self) -> Any:
        return self.alerts or self.logger


def _project_ended(span: Any, outcome: ProjectOutcome) -> None:
    span.set_attributes({"pin.recalc.result": str(outcome.result)})
    if outcome.error is not None:
        span.set_status(tracing.Status(tracing.StatusCode.ERROR, outcome.error[:200]))


# a span per project under the drain's (README "Traces")
@tracing.traced("recalc.project", lambda args, _: {"pin.project.id": str(args[1])}, _project_ended)
def process_project(conn: Connection, project_id: UUID, ctx: ProjectContext) -> ProjectOutcome:
    """One project = one transaction; a failure is rolled back and booked separately."""
    started = time.perf_counter()
    for attempt in range(LOCK_CONFLICT_RETRIES + 1):
        try:
            outcome = _recalc_in_transaction(conn, project_id, ctx)
            break
        except DBAPIError as error:
            reason = transient_reason(error)
            if reason in LOCK_CONFLICTS and attempt < LOCK_CONFLICT_RETRIES and not conn.invalidated:
                log_event(
                    ctx.logger, logging.INFO, "project_recalc_retry", ProjectId=project_id, Reason=reason
                )
                continue
            return _book_failure(conn, project_id, error, started, ctx)
        except Exception as error:  # noqa: BLE001 - any failure of one project must not stop the batch
            return _book_failure(conn, project_id, error, started, ctx)
    outcome.duration_seconds = time.perf_counter() - started
    if outcome.lag_seconds is not None:
        outcome.lag_seconds += outcome.duration_seconds
    observe(outcome, ctx)
    return outcome


def _recalc_in_transaction(conn: Connection, project_id: UUID, ctx: ProjectContext) -> ProjectOutcome:
    with conn.begin():
        # first, before the claim locks rows: handbook-sync takes its lock before the projects' rows
        handbook = ctx.handbooks.for_publish(conn)
        claim = queue.claim_project(conn, project_id, ctx.poison_attempts)
        if claim is None:
            return ProjectOutcome(project_id, Result.TAKEN)
        tracing.set_attributes(
            {"pin.tenant.id": str(claim.tenant_id), "pin.recalc.last_reason": claim.last_reason}
        )
        if not claim.live:
            queue.dequeue_project(conn, project_id)
            return ProjectOutcome(project_id, Result.SKIPPED_ARCHIVED, coalesced=claim.requested_count)
        events: list[OutboxEvent] = []
        republished: Counter = Counter()
        buildings_changed = 0
        for label, text in queue.recompute_project(conn, project_id):
            if label == "building":
                buildings_changed = int(text)
            elif label in _REPUBLISHED_ENTITIES:
                events.append(event_of(label, parse_row(text), handbook, ctx.correlation_id))
                republished[label] += 1
        write_outbox(conn, events)
    return ProjectOutcome(
        project_id,
        Result.RECALCULATED,
        coalesced=claim.requested_count,
        republished={e: republished.get(e, 0) for e in REPUBLISHED},
        buildings_changed=buildings_changed,
        lag_seconds=claim.waited_seconds,
    )


def parse_row(text: str) -> dict[str, Any]:
    """A row returned as JSON by recalc_batch: numerics stay Decimal, timestamps datetime."""
    row = json.loads(text, parse_float=Decimal)
    for name in _TIMESTAMPS:
        if isinstance(row.get(name), str):
            row[name] = datetime.fromisoformat(row[name])
    return row


def event_of(label: str, row: dict[str, Any], handbook: Handbook, correlation_id: str) -> OutboxEvent:
    entity = _REPUBLISHED_ENTITIES[label]
    payload = payloads.upserted_payload(entity.name)(row, handbook)
    return OutboxEvent(entity.upserted_event, str(row["id"]), payload, correlation_id)


def _book_failure(
    conn: Connection, project_id: UUID, error: BaseException, started: float, ctx: ProjectContext
) -> ProjectOutcome:
    """AttemptCount += 1 and LastError in a transaction of their own; DueAt stays."""
    message = error_line(error, LAST_ERROR_MAX)
    attempt_count: int | None = None
    try:
        if conn.invalidated:
            conn.rollback()
        with conn.begin():
            attempt_count = queue.record_failure(conn, project_id, message)
    except Exception as booking_error:  # noqa: BLE001 - the store is down: the row simply stays
        log_event(
            ctx.alert_log,
            logging.ERROR,
            "project_recalc_failure_not_recorded",
            ProjectId=project_id,
            Error=repr(error_line(booking_error)),
        )
    outcome = ProjectOutcome(
        project_id,
        Result.FAILED,
        duration_seconds=time.perf_counter() - started,
        attempt_count=attempt_count,
        error=message,
        poisoned=attempt_count is not None and attempt_count >= ctx.poison_attempts,
        transient=transient_reason(error) is not None,
    )
    observe(outcome, ctx)
    return outcome


def observe(outcome: ProjectOutcome, ctx: ProjectContext) -> None:
    """The logs and metrics of one project (docs/project-aggregates-recalc.md#metrics-logs-and-alerts)."""
    if outcome.result is Result.TAKEN:
        return
    metrics.RECALC_COALESCED.inc(outcome.coalesced)
    if outcome.result is Result.RECALCULATED:
        metrics.RECALC_RUNS.labels(result="success").inc()
        metrics.RECALC_PROCESS_DURATION.observe(outcome.duration_seconds)
        if outcome.lag_seconds is not None:
            metrics.RECALC_LAG.observe(outcome.lag_seconds)
        for entity in REPUBLISHED:
            if outcome.republished.get(entity):
                metrics.RECALC_REPUBLISHED.labels(entity=entity).inc(outcome.republished[entity])
        log_event(
            ctx.logger,
            logging.INFO,
            "project_recalculated",
            ProjectId=outcome.project_id,
            DurationMs=f"{outcome.duration_seconds * 1000:.2f}",
            RepublishedProject=outcome.republished.get("project", 0),
            RepublishedLayout=outcome.republished.get("layout", 0),
            RepublishedLayoutGroup=outcome.republished.get("layout_group", 0),
            BuildingsChanged=outcome.buildings_changed,
            Coalesced=outcome.coalesced,
        )
    elif outcome.result is Result.SKIPPED_ARCHIVED:
        metrics.RECALC_RUNS.labels(result="skipped").inc()
        log_event(ctx.logger, logging.INFO, "project_skipped_archived", ProjectId=outcome.project_id)
    else:
        _observe_failure(outcome, ctx)


def _observe_failure(outcome: ProjectOutcome, ctx: ProjectContext) -> None:
    metrics.RECALC_RUNS.labels(result="error").inc()
    log_event(
        ctx.alert_log,
        logging.WARNING,
        "project_recalc_failed",
        ProjectId=outcome.project_id,
        AttemptCount=outcome.attempt_count,
        Error=repr(outcome.error),
    )
    if outcome.poisoned:
        metrics.RECALC_POISON.inc()
        log_event(
            ctx.alert_log,
            logging.ERROR,
            RECALC_POISON,
            ProjectId=outcome.project_id,
            AttemptCount=outcome.attempt_count,
            Runbook=f"'pin-chessboard recalc reset-poison --project-id {outcome.project_id}'",
        )

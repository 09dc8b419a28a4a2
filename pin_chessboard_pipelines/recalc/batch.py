"""A batch of projects = one transaction (docs/project-aggregates-recalc.md#batches): claim up to
`batch_size` due queue rows (FOR UPDATE SKIP LOCKED, oldest DueAt first), recompute the aggregates
of every claimed project in one set-based statement, write the outbox events of the changed rows,
commit. A batch that fails is rolled back and its projects are processed again one transaction
each (recalc/project.py), so a failure costs only its own project. The SQL is the queue manager's
(recalc/queue.py); logs and metrics are recalc/project.py's, counted after the commit.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.events.outbox import OutboxEvent, write_outbox
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.recalc import queue
from pin_chessboard_pipelines.recalc.project import (
    REPUBLISHED,
    ProjectContext,
    ProjectOutcome,
    Result,
    event_of,
    observe,
    parse_row,
    process_project,
)
from pin_chessboard_pipelines.recalc.queue import Claim

log = logging.getLogger(__name__)


def process_batch(
    conn: Connection,
    ctx: ProjectContext,
    *,
    limit: int,
    exclude: Iterable[UUID] = (),
    started: Callable[[int], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[ProjectOutcome]:
    """Claims and recalculates up to `limit` due projects in one transaction; their outcomes ([]:
    no row was due). `started(n)` is told how many rows the batch claimed.

    The batch failing rolls it back; its projects are then done one transaction each (asking
    `should_stop` between them). A failure of the claim itself, or one that took the connection
    with it (the store went away), is raised: nothing was written, the rows stay queued.
    """
    begun = time.perf_counter()
    claimed: list[tuple[UUID, Claim]] = []
    try:
        with conn.begin():
            # first, before the claim locks rows: handbook-sync takes its lock before the projects' rows
            handbook = ctx.handbooks.for_publish(conn)
            claimed = queue.claim_due_batch(conn, limit, ctx.poison_attempts, exclude)
            if not claimed:
                return []
            if started is not None:
                started(len(claimed))
            changed = queue.recompute_batch(conn, [project_id for project_id, _ in claimed])
            by_project = _write_events(conn, claimed, changed, handbook, ctx)
    except Exception as error:  # noqa: BLE001 - one project's failure of any type: redo one by one
        if not claimed or conn.invalidated:
            raise
        return _one_by_one(conn, claimed, error, ctx, should_stop)
    elapsed = time.perf_counter() - begun
    share = elapsed / len(claimed)  # the batch's time, in equal parts, is each project's duration
    outcomes = []
    for project_id, claim in claimed:
        if claim.live:
            republished, buildings = by_project.get(project_id, (Counter(), 0))
            outcome = ProjectOutcome(
                project_id,
                Result.RECALCULATED,
                duration_seconds=share,
                coalesced=claim.requested_count,
                republished={e: republished.get(e, 0) for e in REPUBLISHED},
                buildings_changed=buildings,
                lag_seconds=claim.waited_seconds + elapsed,  # first request -> this commit
            )
        else:
            outcome = ProjectOutcome(project_id, Result.SKIPPED_ARCHIVED, coalesced=claim.requested_count)
        observe(outcome, ctx)
        outcomes.append(outcome)
    return outcomes


def _write_events(
    conn: Connection,
    claimed: list[tuple[UUID, Claim]],
    changed: list[tuple[str, UUID | None, str]],
    handbook: Handbook,
    ctx: ProjectContext,
) -> dict[UUID, tuple[Counter, int]]:
    """The outbox events of the changed rows, one COPY for the batch (one per project, each in its
    project's span, when tracing is on); (republished by entity, changed buildings) by project."""
    events: dict[UUID, list[OutboxEvent]] = defaultdict(list)
    republished: dict[UUID, Counter] = defaultdict(Counter)
    buildings: dict[UUID, int] = {}
    for label, project_id, text in changed:
        if project_id is None:  # the dequeued count
            continue
        if label == "building":
            buildings[project_id] = int(text)
        elif label in REPUBLISHED:
            events[project_id].append(event_of(label, parse_row(text), handbook, ctx.correlation_id))
            republished[project_id][label] += 1
    if tracing.tracing_enabled():
        for project_id, claim in claimed:
            attributes = {
                "pin.project.id": str(project_id),
                "pin.tenant.id": str(claim.tenant_id),
                "pin.recalc.last_reason": claim.last_reason,
                "pin.recalc.result": str(Result.RECALCULATED if claim.live else Result.SKIPPED_ARCHIVED),
            }
            with tracing.span("recalc.project", attributes):
                write_outbox(conn, events.get(project_id, []))
    else:
        write_outbox(conn, [event for project_id, _ in claimed for event in events.get(project_id, [])])
    return {p: (republished.get(p, Counter()), buildings.get(p, 0)) for p, _ in claimed}


def _one_by_one(
    conn: Connection,
    claimed: list[tuple[UUID, Claim]],
    error: BaseException,
    ctx: ProjectContext,
    should_stop: Callable[[], bool],
) -> list[ProjectOutcome]:
    """The batch failed and was rolled back: each of its projects in a transaction of its own."""
    log_event(
        ctx.alert_log,
        logging.WARNING,
        "recalc_batch_failed",
        Size=len(claimed),
        Error=repr(error_line(error)),
        Then="one transaction per project",
    )
    outcomes = []
    for project_id, _ in claimed:
        if should_stop():
            break
        outcomes.append(process_project(conn, project_id, ctx))
        if conn.invalidated:  # the connection died: the rest stay queued for a fresh one
            break
    return outcomes

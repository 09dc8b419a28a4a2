"""Queue reads and the runbook operations on project_recalc_requests
(docs/project-aggregates-recalc.md#runbook)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.errors import Refused
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.enqueue import enqueue_recalc
from pin_chessboard_pipelines.store.queries import queries


@dataclass(frozen=True)
class DueSummary:
    due: int  # rows the drain would take now
    poison: int  # due rows skipped as poison
    oldest_due_at: datetime | None


def due_summary(conn: Connection, poison_attempts: int) -> DueSummary:
    row = (
        conn.execute(queries("recalc")["due_summary"], {"poison_attempts": poison_attempts}).mappings().one()
    )
    return DueSummary(due=int(row["due"]), poison=int(row["poison"]), oldest_due_at=row["oldest_due_at"])


def next_due_in(
    conn: Connection,
    poison_attempts: int,
    *,
    after: float = 0.0,
    exclude: set[UUID] | frozenset[UUID] = frozenset(),
) -> float | None:
    """Seconds until the earliest DueAt at or after `after` (Unix time) of a row the drain would
    take (<= 0: due already), None when the queue holds none."""
    value = conn.execute(
        queries("recalc")["next_due"],
        {"poison_attempts": poison_attempts, "after": after, "exclude": [str(p) for p in exclude]},
    ).scalar()
    return None if value is None else float(value)


@dataclass(frozen=True)
class QueueStatus:
    depth: int  # rows in the queue
    due: int  # due rows the drain would take now
    poison: int  # rows kept for the runbook
    next_due_at: datetime | None
    requested: int  # Σ RequestedCount of the queued rows
    held: int = 0  # rows held by a Running import run (not in `due`; due when the run ends)

    @property
    def pending(self) -> int:
        """Rows a drain will still process (poison rows wait for the runbook)."""
        return self.depth - self.poison

    def as_dict(self) -> dict[str, Any]:
        return {
            "queueDepth": self.depth,
            "due": self.due,
            "poison": self.poison,
            "held": self.held,
            "nextDueAt": None if self.next_due_at is None else self.next_due_at.isoformat(),
            "requestedEvents": self.requested,
        }


def queue_status(conn: Connection, poison_attempts: int) -> QueueStatus:
    row = (
        conn.execute(queries("recalc")["queue_status"], {"poison_attempts": poison_attempts}).mappings().one()
    )
    return QueueStatus(
        depth=int(row["depth"]),
        due=int(row["due"]),
        poison=int(row["poison"]),
        next_due_at=row["next_due_at"],
        requested=int(row["requested"]),
        held=int(row["held"]),
    )


def aggregates_sample(conn: Connection, limit: int) -> list[dict[str, Any]]:
    """The largest live projects with their stored aggregates."""
    return [
        dict(row) for row in conn.execute(queries("recalc")["aggregates_sample"], {"limit": limit}).mappings()
    ]


def poison_rows(conn: Connection, poison_attempts: int) -> list[dict[str, Any]]:
    return [
        dict(row)
        for row in conn.execute(
            queries("recalc")["poison_rows"], {"poison_attempts": poison_attempts}
        ).mappings()
    ]


def queue_row(conn: Connection, project_id: UUID) -> dict[str, Any] | None:
    row = conn.execute(queries("recalc")["queue_row"], {"project_id": str(project_id)}).mappings().first()
    return None if row is None else dict(row)


def request_recalc(
    conn: Connection,
    project_id: UUID,
    *,
    now: bool,
    debounce_seconds: float,
    cap_seconds: float,
) -> dict[str, Any]:
    """Runbook "force recalc": the debounced upsert, or DueAt = now with `now`. Returns the row."""
    tenant_id = conn.execute(queries("recalc")["project_tenant"], {"project_id": str(project_id)}).scalar()
    if tenant_id is None:
        raise Refused(f"project {project_id} is not in the chessboard store")
    enqueue_recalc(
        conn,
        [(project_id, tenant_id)],
        RecalcReason.CRUD,
        debounce_seconds=debounce_seconds,
        cap_seconds=cap_seconds,
        force=now,
    )
    row = queue_row(conn, project_id)
    assert row is not None
    return row


def reset_poison(conn: Connection, project_id: UUID) -> dict[str, Any]:
    """Runbook "poison project": AttemptCount = 0, DueAt = now()."""
    row = conn.execute(queries("recalc")["reset_poison"], {"project_id": str(project_id)}).mappings().first()
    if row is None:
        raise Refused(f"no recalc request for project {project_id}")
    return dict(row)

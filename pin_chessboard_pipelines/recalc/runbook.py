"""The recalc runbook's reads (docs/project-aggregates-recalc.md#runbook): a project found by what
an operator knows of it (Talent id, PIN id or name), and the queue's status with its oldest rows
(due or not) and their project names.

The runbook's writes are queue.py's (`request_recalc`, `reset_poison`), the audit audit.py's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.errors import Refused
from pin_chessboard_pipelines.recalc.queue import IMPORT_RUN_ALIVE_SECONDS, QueueStatus, queue_status
from pin_chessboard_pipelines.store.queries import queries

OLDEST_ROWS = 10
_LISTED = 10  # projects named in an "ambiguous" refusal


@dataclass(frozen=True)
class ProjectRef:
    id: UUID  # PIN id
    talent_id: UUID
    name: str
    tenant_id: UUID
    status: str
    deleted: bool
    matched_by: str  # PinId | TalentId | Name

    def line(self) -> str:
        deleted = ", deleted" if self.deleted else ""
        return f"{self.name} (PIN id {self.id}, Talent id {self.talent_id}, {self.status}{deleted})"


def parse_reference(reference: str) -> tuple[UUID | None, str]:
    """(the reference as a UUID, or None when it is none; the reference as a name, trimmed)."""
    name = reference.strip()
    if not name:
        raise Refused("project: give a Talent id, a PIN id or a name")
    try:
        return UUID(name), name
    except ValueError:
        return None, name


def pick_project(reference: str, rows: list[ProjectRef]) -> ProjectRef:
    """The one project a reference names: an id match wins over a name; none or several names are
    refused in one line."""
    by_id = [row for row in rows if row.matched_by != "Name"]
    if len(by_id) == 1:
        return by_id[0]
    if not rows:
        raise Refused(f"project {reference!r}: no project has this Talent id, PIN id or name")
    live = [row for row in rows if not row.deleted]
    if len(live) == 1:
        return live[0]
    if len(rows) == 1:
        return rows[0]
    listed = "; ".join(row.line() for row in rows[:_LISTED])
    more = " …" if len(rows) > _LISTED else ""
    raise Refused(f"project {reference!r} is ambiguous, give its Talent id or PIN id: {listed}{more}")


def find_project(conn: Connection, reference: str) -> ProjectRef:
    uuid, name = parse_reference(reference)
    rows = conn.execute(
        queries("recalc_runbook")["find_projects"],
        {"uuid": None if uuid is None else str(uuid), "name": name},
    ).mappings()
    return pick_project(
        reference,
        [
            ProjectRef(
                id=row["id"],
                talent_id=row["external_talent_id"],
                name=row["name"],
                tenant_id=row["tenant_id"],
                status=row["status"],
                deleted=row["deleted_at"] is not None,
                matched_by=row["matched_by"],
            )
            for row in rows
        ],
    )


@dataclass(frozen=True)
class DueRow:
    project_id: UUID
    name: str | None  # None: the project is not (or no longer) in the store
    due_at: datetime
    requested_count: int
    last_reason: str
    attempt_count: int
    last_error: str | None
    state: str  # due | waiting (DueAt ahead) | held | poison


@dataclass(frozen=True)
class RecalcStatus:
    queue: QueueStatus
    held: int  # rows held by a Running import run
    oldest: list[DueRow]  # the rows with the earliest DueAt, due or not
    read_at: datetime | None = None  # the database's now() every figure and state is as of

    def figures(self) -> dict[str, Any]:
        """The queue at a glance (QueueStatus.as_dict) with the held rows and the next DueAt to the
        second ("-": none): what the runbook's status metadata and its log line show."""
        next_due = self.queue.next_due_at
        return {
            **self.queue.as_dict(),
            "held": self.held,
            "nextDueAt": "-" if next_due is None else next_due.isoformat(timespec="seconds"),
        }


def recalc_status(conn: Connection, poison_attempts: int, oldest: int = OLDEST_ROWS) -> RecalcStatus:
    sql = queries("recalc_runbook")
    alive = {"alive_seconds": IMPORT_RUN_ALIVE_SECONDS}
    # one transaction: now() is the same in every statement, so the states are as of read_at
    read_at = conn.execute(sql["read_at"]).scalar_one()
    held = conn.execute(sql["held_count"], alive).scalar_one()
    rows = conn.execute(sql["oldest_rows"], {"poison_attempts": poison_attempts, "limit": oldest, **alive})
    return RecalcStatus(
        queue=queue_status(conn, poison_attempts),
        held=int(held),
        oldest=[_due_row(row) for row in rows.mappings()],
        read_at=read_at,
    )


def _due_row(row: Any) -> DueRow:
    return DueRow(
        project_id=row["project_id"],
        name=row["name"],
        due_at=row["due_at"],
        requested_count=int(row["requested_count"]),
        last_reason=row["last_reason"],
        attempt_count=int(row["attempt_count"]),
        last_error=row["last_error"],
        state=row["state"],
    )


def status_fingerprint(status: RecalcStatus) -> str:
    """What the queue's status shows, in one string: two statuses with the same one read the same
    (the queue sensor records a status only when it changed)."""
    queue = status.queue
    parts = [
        f"{queue.depth}/{queue.due}/{status.held}/{queue.poison}/{queue.requested}",
        "-" if queue.next_due_at is None else queue.next_due_at.isoformat(),
        *(
            f"{row.project_id}:{row.state}:{row.due_at.isoformat()}:{row.attempt_count}:{row.requested_count}"
            for row in status.oldest
        ),
    ]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]

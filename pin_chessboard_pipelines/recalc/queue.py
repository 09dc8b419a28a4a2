"""The queue manager: every SQL call on project_recalc_requests and the recalc itself, in one place
(docs/project-aggregates-recalc.md). The drain (recalc/drain.py, recalc/project.py) owns the loop
and the transactions and calls these; it runs no SQL of its own.

- raisers: `enqueue_recalc`, `release_import_requests`
- the drain: `claim_due_batch`, `recompute_batch` (a batch in one transaction); `select_due_batch`,
  `claim_project`, `recompute_project`, `dequeue_project` (one project's transaction, the fallback
  of a batch that failed); `record_failure`, `next_due_in`
- the sensor, the CLI and the runbook: `due_summary`, `queue_status`, `poison_rows`, `queue_row`,
  `request_recalc`, `reset_poison`, `aggregates_sample`
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection, RowMapping

from pin_chessboard_pipelines.errors import Refused
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.store.queries import queries

# A Running import run holds its requests while its run worker (the process that executes its Dagster
# run, talent_import/run_worker.py) renewed the run's heartbeat within this, whatever its steps do
# (docs/project-aggregates-recalc.md#held-requests): the requests of a run whose run worker died are
# due like any other, even while the run stays resumable.
IMPORT_RUN_ALIVE_SECONDS = 90.0
_ALIVE = {"alive_seconds": IMPORT_RUN_ALIVE_SECONDS}

LAST_ERROR_MAX = (
    1024  # characters of last_error (docs/project-aggregates-recalc.md#one-transaction-per-project)
)


# -- raisers -----------------------------------------------------------------------------------


def enqueue_recalc(
    conn: Connection,
    projects: Iterable[tuple[UUID, UUID]],
    reason: RecalcReason,
    *,
    debounce_seconds: float,
    cap_seconds: float,
    force: bool = False,
    run_id: UUID | None = None,
) -> int:
    """Upserts one debounced request per (project_id, tenant_id); returns how many projects.

    Duplicates are folded (one request per project per call). Rows are locked in project_id order,
    so concurrent callers cannot deadlock each other. Writers of a project's rows call this BEFORE
    they change them (queue row first, then replica rows: the drain's order), so a writer and a
    drain never wait for each other in a cycle.

    `run_id`: an import run's request, held until the run finishes (`release_import_requests`)
    and counted once per run (docs/talent-initial-import.md#events-and-recalc-requests).
    """
    unique = dict(projects)
    if not unique:
        return 0
    ids = sorted(unique)
    with tracing.span("recalc.request", {"pin.recalc.projects": len(ids), "pin.recalc.reason": str(reason)}):
        conn.execute(
            queries("recalc_queue")["enqueue_recalc"],
            {
                "project_ids": [str(p) for p in ids],
                "tenant_ids": [str(unique[p]) for p in ids],
                "reason": str(reason),
                "debounce": float(debounce_seconds),
                "cap": float(cap_seconds),
                "force": force,
                "run_id": None if run_id is None else str(run_id),
            },
        )
    return len(ids)


def release_import_requests(
    conn: Connection, run_id: UUID, *, debounce_seconds: float, cap_seconds: float
) -> int:
    """The requests an import run held become due by the debounce and the cap (counted from their
    first request); returns how many. Every end of a run calls it in the transaction that ends the
    run: Completed, Failed, Cancelled, abandoned, and marked failed because its process is gone
    (docs/store.md#held-requests)."""
    return conn.execute(
        queries("recalc_queue")["release_import_requests"],
        {"run_id": str(run_id), "debounce": float(debounce_seconds), "cap": float(cap_seconds)},
    ).rowcount


def release_dagster_run_requests(
    conn: Connection, dagster_run_ids: Iterable[str], *, debounce_seconds: float, cap_seconds: float
) -> int:
    """Releases the requests held by the import runs of these Dagster runs (marked failed because
    their process is gone); returns how many."""
    ids = sorted(set(dagster_run_ids))
    if not ids:
        return 0
    return conn.execute(
        queries("recalc_queue")["release_dagster_run_requests"],
        {"dagster_run_ids": ids, "debounce": float(debounce_seconds), "cap": float(cap_seconds)},
    ).rowcount


def release_ended_import_requests(conn: Connection, *, debounce_seconds: float, cap_seconds: float) -> int:
    """Releases the requests of every run that is no longer Running, whoever ended it, or whose
    run worker is gone (no heartbeat for IMPORT_RUN_ALIVE_SECONDS); returns how many. The safety
    net for an end path that marked a run ended without releasing it, and for a killed import."""
    return conn.execute(
        queries("recalc_queue")["release_ended_import_requests"],
        {"debounce": float(debounce_seconds), "cap": float(cap_seconds), **_ALIVE},
    ).rowcount


def _due_batch(batch_size: int, poison_attempts: int, exclude: Iterable[UUID]) -> dict[str, Any]:
    """The parameters of select_due_batch and claim_due_batch (recalc.sql): their rules are the same."""
    return {
        "batch_size": batch_size,
        "poison_attempts": poison_attempts,
        "exclude": [str(p) for p in exclude],
        **_ALIVE,
    }


def select_due_batch(
    conn: Connection, batch_size: int, poison_attempts: int, exclude: Iterable[UUID] = ()
) -> list[UUID]:
    """Up to `batch_size` due rows, oldest DueAt first, skipping rows another drain holds
    (FOR UPDATE SKIP LOCKED), poison rows and `exclude`."""
    with conn.begin():
        rows = conn.execute(
            queries("recalc")["select_due_batch"], _due_batch(batch_size, poison_attempts, exclude)
        ).scalars()
        return [_uuid(p) for p in rows]


@dataclass(frozen=True)
class Claim:
    """A due queue row locked for its project's transaction."""

    tenant_id: UUID
    requested_count: int  # requests coalesced into the row
    last_reason: str
    waited_seconds: float  # first request -> now
    live: bool  # the project exists and is neither deleted nor archived

    @staticmethod
    def of(row: RowMapping) -> Claim:
        """The claim of a claim_project / claim_due_batch row."""
        return Claim(
            tenant_id=row["tenant_id"],
            requested_count=int(row["requested_count"]),
            last_reason=row["last_reason"],
            waited_seconds=float(row["waited_seconds"]),
            live=bool(row["live"]),
        )


def claim_project(conn: Connection, project_id: UUID, poison_attempts: int) -> Claim | None:
    """Locks the project's due row in the caller's transaction; None: another drain holds it, it was
    drained already, it is no longer due or it is poison."""
    row = (
        conn.execute(
            queries("recalc")["claim_project"],
            {"project_id": str(project_id), "poison_attempts": poison_attempts, **_ALIVE},
        )
        .mappings()
        .first()
    )
    return None if row is None else Claim.of(row)


def recompute_project(conn: Connection, project_id: UUID) -> list[tuple[str, str]]:
    """The batch's statement on one claimed project (it also deletes the queue row): (label, JSON
    text) of every changed project / layout / layout_group row, ("building", count of changed
    buildings) when any changed, and ("dequeued", n)."""
    return [(label, text) for label, _, text in recompute_batch(conn, [project_id])]


def claim_due_batch(
    conn: Connection, batch_size: int, poison_attempts: int, exclude: Iterable[UUID] = ()
) -> list[tuple[UUID, Claim]]:
    """(project id, claim) of up to `batch_size` due rows locked in the caller's transaction, oldest
    DueAt first, skipping rows another drain holds (SKIP LOCKED), poison rows, `exclude` and rows
    held by a live import run."""
    rows = conn.execute(
        queries("recalc")["claim_due_batch"], _due_batch(batch_size, poison_attempts, exclude)
    ).mappings()
    return [(_uuid(row["project_id"]), Claim.of(row)) for row in rows]


def recompute_batch(conn: Connection, claimed: Iterable[UUID]) -> list[tuple[str, UUID | None, str]]:
    """The one set-based recalc of a batch's claimed projects (it also deletes their queue rows):
    (label, project id, JSON text) of every changed project / layout / layout_group row,
    ("building", project id, count of its changed buildings) and ("dequeued", None, n)."""
    rows = conn.execute(queries("recalc")["recalc_batch"], {"claimed": [str(p) for p in claimed]}).all()
    return [
        (str(label), None if project_id is None else _uuid(project_id), str(text))
        for label, project_id, text in rows
    ]


def dequeue_project(conn: Connection, project_id: UUID) -> None:
    """Deletes a claimed row whose project carries no aggregates (archived, deleted, missing)."""
    conn.execute(queries("recalc")["dequeue_project"], {"project_id": str(project_id)})


def record_failure(conn: Connection, project_id: UUID, error: str) -> int | None:
    """AttemptCount + 1 and LastError, DueAt unchanged; the new AttemptCount (None: no row)."""
    value = conn.execute(
        queries("recalc")["record_failure"],
        {"project_id": str(project_id), "error": error[:LAST_ERROR_MAX]},
    ).scalar()
    return None if value is None else int(value)


# -- the sensor, the CLI and the runbook -------------------------------------------------------


@dataclass(frozen=True)
class DueSummary:
    due: int  # rows the drain would take now
    poison: int  # due rows skipped as poison
    oldest_due_at: datetime | None


def due_summary(conn: Connection, poison_attempts: int) -> DueSummary:
    row = (
        conn.execute(queries("recalc")["due_summary"], {"poison_attempts": poison_attempts, **_ALIVE})
        .mappings()
        .one()
    )
    return DueSummary(due=int(row["due"]), poison=int(row["poison"]), oldest_due_at=row["oldest_due_at"])


def next_due_in(
    conn: Connection,
    poison_attempts: int,
    *,
    after: float = 0.0,
    exclude: Iterable[UUID] = (),
) -> float | None:
    """Seconds until the earliest DueAt at or after `after` (Unix time) of a row the drain would
    take (<= 0: due already), None when the queue holds none."""
    value = conn.execute(
        queries("recalc")["next_due"],
        {"poison_attempts": poison_attempts, "after": after, "exclude": [str(p) for p in exclude], **_ALIVE},
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
        conn.execute(queries("recalc")["queue_status"], {"poison_attempts": poison_attempts, **_ALIVE})
        .mappings()
        .one()
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


def _uuid(value: Any) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))

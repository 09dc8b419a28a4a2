"""`enqueue_recalc`: the one function every raiser calls inside its own transaction."""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.store.queries import queries


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
    """Releases the requests of every run that is no longer Running, whoever ended it; returns how
    many. The safety net for an end path that marked a run ended without releasing it."""
    return conn.execute(
        queries("recalc_queue")["release_ended_import_requests"],
        {"debounce": float(debounce_seconds), "cap": float(cap_seconds)},
    ).rowcount

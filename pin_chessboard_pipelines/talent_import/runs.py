"""Run rows of the import: start, resume, end, heartbeats and figures; the pages are page_queue.py's.

Functions of a SQLAlchemy connection (the caller owns the transaction); the SQL is in
store/sql/talent_import.sql.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection, RowMapping

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.errors import RunAlive
from pin_chessboard_pipelines.recalc.queue import release_import_requests
from pin_chessboard_pipelines.replica.apply import DryRunState
from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.talent_import.request import (
    RunStatus,
    TalentInitialImportRequest,
)
from pin_chessboard_pipelines.talent_import.result import (
    StageCounters,
    TalentInitialImportResult,
    stages_from_mapping,
)

Row = RowMapping


def statement(name: str):
    """A statement of store/sql/talent_import.sql, by its `-- name:`."""
    return queries("talent_import")[name]


@dataclass(frozen=True)
class StageState:
    pages: int
    done: int
    failed: int
    max_attempts: int
    walked_scopes: frozenset[str]
    span_seconds: float = 0.0  # from the stage's first claim to its last page finished

    def complete(self, scope_keys: list[str]) -> bool:
        """The barrier: every walk of the stage ended and every page is Done."""
        return self.walked_scopes >= set(scope_keys) and self.done == self.pages


def _same_request(run: Row, request: TalentInitialImportRequest) -> bool:
    return (
        run["mode"] == request.mode.value
        and bool(run["dry_run"]) == request.dry_run
        and list(run["scopes"] or []) == request.scope_keys
    )


def start_or_resume_run(
    conn: Connection,
    request: TalentInitialImportRequest,
    dagster_run_id: str | None,
    *,
    alive_seconds: float = 90.0,
    debounce_seconds: float = 30.0,
    cap_seconds: float = 300.0,
) -> tuple[Row, bool]:
    """The run row of this import and whether it resumes an earlier attempt (docs/talent-initial-import.md#resume).

    Called with the advisory lock held. A Running run of another correlation id whose heartbeat is
    fresh is alive: RunAlive, nothing written. A Running run without heartbeat for `alive_seconds`
    is gone (its processes died): the same request resumes it, another request ends it Failed, its
    held recalc requests released. Otherwise a Failed or Cancelled run of the same request is
    resumed: the one of this correlation id (Dagster's "Re-execute from failure"), or else the
    latest run of all (the operator runs the same import again).
    """
    resumable: Row | None = None
    params = {"alive_seconds": float(alive_seconds), "lock_free": True}  # the caller holds the lock
    running = conn.execute(statement("running_runs"), params).mappings().all()
    for run in running:
        if run["alive"] and run["correlation_id"] != request.correlation_id:
            raise RunAlive(run)
    for run in running:
        if resumable is None and _same_request(run, request):
            resumable = run
        else:
            gone = "its run worker is gone (no heartbeat)" if not run["alive"] else "superseded"
            end_gone_run(
                conn,
                run["id"],
                f"abandoned: {gone}; import {request.correlation_id} started with another request",
                debounce_seconds,
                cap_seconds,
            )
    resumable = resumable or _ended_run_to_resume(conn, request)
    if resumable is not None:
        return _resume(conn, resumable, dagster_run_id), True
    row = (
        conn.execute(
            statement("insert_run"),
            {
                "id": uuid.uuid4(),
                "mode": request.mode.value,
                "correlation_id": request.correlation_id,
                "dry_run": request.dry_run,
                "developer_id_filter": request.developer_id_filter,
                "project_id_filter": request.project_id,
                "page_size": request.page_size,
                "scopes": json.dumps(request.scope_keys),
                "dagster_run_id": dagster_run_id,
            },
        )
        .mappings()
        .one()
    )
    return row, False


def resume_refusal(correlation_id: str, latest: Mapping[Any, Any] | None) -> str | None:
    """Why a re-execution (of a run or a backfill) may not run: its import run has Completed, and a
    re-execution resumes an import, it never starts a new one (a second "Re-execute from failure").
    None: it resumes `latest` (Failed, Cancelled, or Running without a process), or starts the
    import its first run never started."""
    if latest is None or latest["status"] != RunStatus.COMPLETED.value:
        return None
    finished = latest.get("finished_at")
    when = f" at {finished:%Y-%m-%d %H:%M:%S} UTC" if finished is not None else ""
    return (
        f"nothing to resume: import run {latest['id']} (correlation id {correlation_id}) Completed{when}; "
        "a re-execution starts no new import: launch the assets or talent_full_bootstrap for one"
    )


def _ended_run_to_resume(conn: Connection, request: TalentInitialImportRequest) -> Row | None:
    """A Failed or Cancelled run of the same request: this correlation id's, else the latest run."""
    for name in ("latest_run_of_correlation", "latest_run"):
        earlier = conn.execute(statement(name), {"correlation_id": request.correlation_id}).mappings().first()
        if (
            earlier is not None
            and earlier["status"] in (RunStatus.FAILED.value, RunStatus.CANCELLED.value)
            and _same_request(earlier, request)
        ):
            return earlier
    return None


def _resume(conn: Connection, run: Row, dagster_run_id: str | None) -> Row:
    """Running again: its unfinished pages Pending (a DryRun walks again from the start, with an
    empty view), the Dagster run that works on it now."""
    if run["dry_run"]:
        conn.execute(statement("delete_dry_run_states"), {"run_id": run["id"]})
        conn.execute(statement("delete_pages"), {"run_id": run["id"]})
    else:
        conn.execute(statement("reopen_pages"), {"run_id": run["id"]})
    return (
        conn.execute(statement("resume_run"), {"run_id": run["id"], "dagster_run_id": dagster_run_id})
        .mappings()
        .one()
    )


ANALYZE_LOCK_TIMEOUT = "5s"  # the longest wait of the statistics for a VACUUM or another ANALYZE


def analyze_filled_tables(conn: Connection) -> None:
    """The planner statistics of the replica tables, the recalc queue and the outbox, in the
    caller's transaction: a bulk load leaves them as before it, and the recalc's plans on the
    loaded tables then scan a whole index per project (docs/talent-initial-import.md#planner-statistics)."""
    conn.execute(statement("analyze_lock_timeout"), {"timeout": ANALYZE_LOCK_TIMEOUT})
    conn.execute(statement("analyze_filled_tables"))


def finish_run(conn: Connection, run_id: uuid.UUID, status: RunStatus, error: str | None = None) -> Row:
    conn.execute(statement("sum_stage_counters"), {"run_id": run_id})
    conn.execute(statement("delete_staged_pages"), {"run_id": run_id})
    return (
        conn.execute(statement("finish_run"), {"run_id": run_id, "status": status.value, "error": error})
        .mappings()
        .one()
    )


def end_gone_run(
    conn: Connection, run_id: uuid.UUID, error: str, debounce_seconds: float, cap_seconds: float
) -> Row | None:
    """A Running run whose processes are gone: Failed, its held recalc requests due (one per project)."""
    return _end_releasing_requests(conn, run_id, RunStatus.FAILED, error, debounce_seconds, cap_seconds)


def end_run_of_dagster_run(
    conn: Connection,
    dagster_run_id: str,
    status: RunStatus,
    error: str,
    *,
    debounce_seconds: float,
    cap_seconds: float,
) -> Row | None:
    """The import run a Dagster run worked on, if it still runs with that Dagster run: ended
    `status` (its steps never got to end it: a terminate between steps, a killed process), its held
    recalc requests due. None when there is none, or a later Dagster run resumed it (the row is
    locked first: a retry's resume that commits meanwhile is not undone)."""
    run = (
        conn.execute(statement("lock_running_run_of_dagster_run"), {"dagster_run_id": dagster_run_id})
        .mappings()
        .first()
    )
    if run is None:
        return None
    return _end_releasing_requests(conn, run["id"], status, error, debounce_seconds, cap_seconds)


def _end_releasing_requests(
    conn: Connection,
    run_id: uuid.UUID,
    status: RunStatus,
    error: str,
    debounce_seconds: float,
    cap_seconds: float,
) -> Row | None:
    """A Running run ended `status` by someone other than its own steps, its held recalc requests due."""
    release_import_requests(conn, run_id, debounce_seconds=debounce_seconds, cap_seconds=cap_seconds)
    return end_running_run(conn, run_id, status, error)


def end_running_run(
    conn: Connection, run_id: uuid.UUID, status: RunStatus, error: str | None = None
) -> Row | None:
    """Ends the run if it still runs (None: another process ended it first); what it staged goes."""
    conn.execute(statement("sum_stage_counters"), {"run_id": run_id})
    ended = (
        conn.execute(statement("end_running_run"), {"run_id": run_id, "status": status.value, "error": error})
        .mappings()
        .first()
    )
    if ended is not None:
        conn.execute(statement("delete_staged_pages"), {"run_id": run_id})
    return ended


def touch_run(conn: Connection, run_id: uuid.UUID) -> str | None:
    """The run's heartbeat renewed by a live process of it; its status."""
    return conn.execute(statement("heartbeat_run"), {"run_id": run_id}).scalar()


def beat_run_worker(conn: Connection, dagster_run_id: str) -> int:
    """The run worker of `dagster_run_id` is alive: the Running import run of that Dagster run (if
    any yet) renews worker_heartbeat_at; returns how many rows (0 or 1)."""
    return conn.execute(statement("heartbeat_run_worker"), {"dagster_run_id": dagster_run_id}).rowcount


def heartbeat(conn: Connection, run_id: uuid.UUID, claimed_by: str, page_ids: list[int]) -> str | None:
    """Renews the run's heartbeat and those of `page_ids` (pages this process works on); returns the
    run's status (None: no such run)."""
    if page_ids:
        conn.execute(statement("heartbeat_pages"), {"page_ids": page_ids, "claimed_by": claimed_by})
    return touch_run(conn, run_id)


def save_dry_run_state(conn: Connection, run_id: uuid.UUID, stage: str, state: dict) -> None:
    conn.execute(
        statement("save_dry_run_state"), {"run_id": run_id, "stage": stage, "state": json.dumps(state)}
    )


def latest_dry_run_state(conn: Connection, run_id: uuid.UUID) -> DryRunState | None:
    """The DryRun's view after its latest stage (each stage saves the whole view), None before any."""
    states = {
        row["stage"]: row["state"]
        for row in conn.execute(statement("dry_run_states"), {"run_id": run_id}).mappings()
    }
    latest = [stage.stage for stage in ENTITIES if stage.stage in states]
    return DryRunState.from_json(states[latest[-1]]) if latest else None


@dataclass(frozen=True)
class StageFigures:
    """A stage's pages finished since a moment (this Dagster run's share)."""

    pages: int
    items: int
    page_p99_ms: float
    processes: int
    seconds: float

    @property
    def items_per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0


def stage_figures(conn: Connection, run_id: uuid.UUID, stage: str, since: datetime) -> StageFigures:
    row = (
        conn.execute(statement("stage_figures"), {"run_id": run_id, "stage": stage, "since": since})
        .mappings()
        .one()
    )
    return StageFigures(
        int(row["pages"]),
        int(row["items"]),
        float(row["page_p99_ms"]),
        int(row["processes"]),
        float(row["seconds"]),
    )


def sum_stage_counters(conn: Connection, run_id: uuid.UUID) -> dict[str, StageCounters]:
    counters = conn.execute(statement("sum_stage_counters"), {"run_id": run_id}).scalar_one()
    return stages_from_mapping(counters)


def previous_stage_planned(conn: Connection, run_id: uuid.UUID, stage: str) -> int | None:
    """Items the latest Completed run of the same scopes and mode read in `stage` (None: no such run)."""
    planned = conn.execute(statement("previous_stage_planned"), {"run_id": run_id, "stage": stage}).scalar()
    return None if planned is None else int(planned)


def developer_names(conn: Connection, talent_ids: list[str]) -> dict[str, str]:
    """Talent developer id -> the replica's name of the developer (those in the replica)."""
    rows = conn.execute(statement("developer_names"), {"talent_ids": talent_ids})
    return {talent_id: name for talent_id, name in rows}


def get_run(conn: Connection, run_id: uuid.UUID) -> Row | None:
    return conn.execute(statement("run_by_id"), {"run_id": run_id}).mappings().first()


def result_of(run: Row) -> TalentInitialImportResult:
    finished = run["finished_at"]
    duration = 0.0 if finished is None else (finished - run["started_at"]).total_seconds()
    return TalentInitialImportResult(
        run_id=str(run["id"]),
        correlation_id=run["correlation_id"],
        mode=run["mode"],
        status=run["status"],
        dry_run=bool(run["dry_run"]),
        duration_seconds=max(0.0, duration),
        stages=stages_from_mapping(run["stage_counters"]),
    )


def stage_tenant_counters(conn: Connection, run_id: uuid.UUID, stage: str) -> dict[str, StageCounters]:
    """Developer PIN id ("" = unknown) -> its applied / skipped / failed of the stage (planned = their
    sum: the items of that developer read from the source)."""
    rows = conn.execute(statement("stage_tenant_counters"), {"run_id": run_id, "stage": stage}).mappings()
    return {
        row["tenant"]: StageCounters(
            planned=int(row["applied"] + row["skipped"] + row["failed"]),
            applied=int(row["applied"]),
            skipped=int(row["skipped"]),
            failed=int(row["failed"]),
        )
        for row in rows
    }


def stage_state(conn: Connection, run_id: uuid.UUID, stage: str) -> StageState:
    row = conn.execute(statement("stage_state"), {"run_id": run_id, "stage": stage}).mappings().one()
    return StageState(
        pages=row["pages"],
        done=row["done"],
        failed=row["failed"],
        max_attempts=row["max_attempts"],
        walked_scopes=frozenset(row["walked_scopes"] or ()),
        span_seconds=max(0.0, float(row["span_seconds"])),
    )


def progress(conn: Connection, run_id: uuid.UUID) -> dict[str, Row]:
    return {
        row["stage"]: row for row in conn.execute(statement("progress"), {"run_id": run_id}).mappings().all()
    }


def stuck_runs(conn: Connection, stuck_seconds: float) -> list[Row]:
    return list(
        conn.execute(statement("stuck_runs"), {"stuck_seconds": float(stuck_seconds)}).mappings().all()
    )


def failed_items_of_run(conn: Connection, run_id: uuid.UUID) -> list[Row]:
    return list(conn.execute(statement("failed_items_of_run"), {"run_id": run_id}).mappings().all())


def running_correlation_ids(conn: Connection, alive_seconds: float, *, lock_free: bool) -> dict[str, bool]:
    """Correlation id -> alive, of the Running runs (see running_runs)."""
    params = {"alive_seconds": float(alive_seconds), "lock_free": lock_free}
    return {
        row["correlation_id"]: row["alive"]
        for row in conn.execute(statement("running_runs"), params).mappings()
    }


def mark_lock_held(conn: Connection, run_id: uuid.UUID, lock_held: bool) -> None:
    conn.execute(statement("mark_lock_held"), {"run_id": run_id, "lock_held": lock_held})


def run_of_dagster_run(conn: Connection, dagster_run_id: str) -> Row | None:
    return (
        conn.execute(statement("run_of_dagster_run"), {"dagster_run_id": dagster_run_id}).mappings().first()
    )


def import_run_named(conn: Connection, ids: list[str]) -> Row | None:
    """The import run whose own id, correlation id or latest Dagster run id is one of `ids`."""
    return conn.execute(statement("import_run_named"), {"ids": [i.lower() for i in ids]}).mappings().first()


def latest_run_of_correlation(conn: Connection, correlation_id: str) -> Row | None:
    return (
        conn.execute(statement("latest_run_of_correlation"), {"correlation_id": correlation_id})
        .mappings()
        .first()
    )


def latest_finished_run(conn: Connection) -> Row | None:
    return conn.execute(statement("latest_finished_run")).mappings().first()

"""A talent_import_runs row written directly, for tests of what reads or ends one (sensors, the
queue's held requests, metrics)."""

from __future__ import annotations

import uuid
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Engine


def insert_import_run(
    engine: Engine,
    run_id: uuid.UUID | None = None,
    *,
    status: str = "Running",
    started_at: datetime | None = None,
    correlation_id: str = "c",
    page_size: int = 5,
    dagster_run_id: str | None = None,
) -> uuid.UUID:
    """An ApiPull run row (started now unless `started_at`); returns its id."""
    run_id = run_id or uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO chessboard.talent_import_runs (id, mode, status, started_at, correlation_id,"
                " dry_run, page_size, dagster_run_id)"
                " VALUES (:id, 'ApiPull', :status, COALESCE(:started, now()), :correlation, false,"
                " :page_size, :dagster)"
            ),
            {
                "id": run_id,
                "status": status,
                "started": started_at,
                "correlation": correlation_id,
                "page_size": page_size,
                "dagster": dagster_run_id,
            },
        )
    return run_id

"""talent_import_runs.worker_heartbeat_at: an import run is alive while its run worker is

Revision ID: 0015_import_run_worker
Revises: 0014_talent_tombstones
Create Date: 2026-12-05 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_import_run_worker"
down_revision = "0014_talent_tombstones"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "talent_import_runs",
        sa.Column("worker_heartbeat_at", sa.DateTime(timezone=True)),
        schema="chessboard",
    )
    # A Running run is alive while its run worker (the process that executes the Dagster run: the
    # CLI, the run pod, the multiprocess executor's parent) renewed worker_heartbeat_at within
    # alive_seconds, whatever its steps do (docs/talent-initial-import.md#pages-and-leases). A run no run
    # worker ever beat for (a run outside Dagster, an executor without the beat) keeps the rule of
    # its processes' heartbeat. Still one expression: the planner inlines it.
    op.execute(
        """
        CREATE OR REPLACE FUNCTION chessboard.import_run_alive(
            run chessboard.talent_import_runs, alive_seconds double precision)
        RETURNS boolean
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$
          SELECT run.status = 'Running'
             AND COALESCE(run.worker_heartbeat_at, run.heartbeat_at, run.started_at)
                 > now() - make_interval(secs => alive_seconds)
        $$
        """
    )


def downgrade() -> None:
    op.execute(
        """
        CREATE OR REPLACE FUNCTION chessboard.import_run_alive(
            run chessboard.talent_import_runs, alive_seconds double precision)
        RETURNS boolean
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$
          SELECT run.status = 'Running'
             AND COALESCE(run.heartbeat_at, run.started_at) > now() - make_interval(secs => alive_seconds)
        $$
        """
    )
    op.drop_column("talent_import_runs", "worker_heartbeat_at", schema="chessboard")

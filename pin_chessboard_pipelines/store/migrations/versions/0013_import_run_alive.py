"""chessboard.import_run_alive(run, alive_seconds): the one definition of a live import run

Revision ID: 0013_import_run_alive
Revises: 0012_import_staged_pages
Create Date: 2026-12-03 17:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0013_import_run_alive"
down_revision = "0012_import_staged_pages"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a Running run one of whose processes renewed its heartbeat (or that started) within
    # alive_seconds, in whatever process or pod it runs (docs/talent-initial-import.md#liveness).
    # A single-expression SQL function: the planner inlines it, the queries keep their plans.
    op.execute(
        """
        CREATE FUNCTION chessboard.import_run_alive(run chessboard.talent_import_runs, alive_seconds double precision)
        RETURNS boolean
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$
          SELECT run.status = 'Running'
             AND COALESCE(run.heartbeat_at, run.started_at) > now() - make_interval(secs => alive_seconds)
        $$
        """
    )


def downgrade() -> None:
    op.execute("DROP FUNCTION chessboard.import_run_alive(chessboard.talent_import_runs, double precision)")

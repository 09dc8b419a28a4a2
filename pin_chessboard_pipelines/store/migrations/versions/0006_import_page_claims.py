"""talent import: who holds a page, heartbeats of pages and runs, a DryRun's view per stage

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The pages of one run are claimed by several processes (docs/talent-initial-import.md#pages-and-leases):
    # who claimed a page last and when, the heartbeat of a page being worked on, when it became Done or Failed.
    op.add_column("talent_import_pages", sa.Column("claimed_by", sa.Text()), schema="chessboard")
    op.add_column("talent_import_pages", sa.Column("planned_by", sa.Text()), schema="chessboard")
    op.add_column(
        "talent_import_pages", sa.Column("claimed_at", sa.DateTime(timezone=True)), schema="chessboard"
    )
    op.add_column(
        "talent_import_pages", sa.Column("heartbeat_at", sa.DateTime(timezone=True)), schema="chessboard"
    )
    op.add_column(
        "talent_import_pages", sa.Column("finished_at", sa.DateTime(timezone=True)), schema="chessboard"
    )
    # A run is alive while one of its processes renews this (the steps of a run, the CLI that launched it).
    op.add_column(
        "talent_import_runs", sa.Column("heartbeat_at", sa.DateTime(timezone=True)), schema="chessboard"
    )
    # The run's process holds the import lock for the whole run (the CLI): once the lock is free, the
    # run has no live holder, whatever its heartbeat says.
    op.add_column(
        "talent_import_runs",
        sa.Column("lock_held", sa.Boolean(), server_default="false", nullable=False),
        schema="chessboard",
    )
    # What a DryRun "applied" in a stage, for the stages after it (each stage may run in its own process).
    op.create_table(
        "talent_import_dry_run_states",
        sa.Column("run_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("state", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["chessboard.talent_import_runs.id"]),
        sa.PrimaryKeyConstraint("run_id", "stage"),
        schema="chessboard",
    )


def downgrade() -> None:
    op.drop_table("talent_import_dry_run_states", schema="chessboard")
    op.drop_column("talent_import_runs", "lock_held", schema="chessboard")
    op.drop_column("talent_import_runs", "heartbeat_at", schema="chessboard")
    for column in ("finished_at", "heartbeat_at", "claimed_at", "claimed_by", "planned_by"):
        op.drop_column("talent_import_pages", column, schema="chessboard")

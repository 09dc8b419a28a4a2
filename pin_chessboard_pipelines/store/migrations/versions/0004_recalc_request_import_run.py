"""recalc requests: the import run that holds a request until it finishes

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # One request per project per import run (docs/talent-initial-import.md#events-and-recalc-requests):
    # a request an import page wrote waits for the end of its run, and later pages of the same run
    # do not count again.
    op.add_column(
        "project_recalc_requests",
        sa.Column("import_run_id", postgresql.UUID(as_uuid=True), nullable=True),
        schema="chessboard",
    )
    op.create_index(
        "ix_project_recalc_import_run",
        "project_recalc_requests",
        ["import_run_id"],
        schema="chessboard",
        postgresql_where=sa.text("import_run_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_project_recalc_import_run", "project_recalc_requests", schema="chessboard")
    op.drop_column("project_recalc_requests", "import_run_id", schema="chessboard")

"""talent import: walk position and claim fencing of pages, scopes of a run

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A page row records where the walk goes on after it, so a resumed run plans on from the last
    # recorded page instead of walking the source again (docs/talent-initial-import.md#resume).
    op.add_column(
        "talent_import_pages", sa.Column("next_cursor", sa.Text(), nullable=True), schema="chessboard"
    )
    op.add_column(
        "talent_import_pages",
        sa.Column("is_last", sa.Boolean(), server_default="false", nullable=False),
        schema="chessboard",
    )
    # Fencing token of the current claim: a worker whose lease was taken over cannot mark the page Done.
    op.add_column(
        "talent_import_pages", sa.Column("claim_token", sa.UUID(), nullable=True), schema="chessboard"
    )
    op.add_column(
        "talent_import_runs",
        sa.Column(
            "scopes",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'[]'::jsonb"),
            nullable=False,
        ),
        schema="chessboard",
    )


def downgrade() -> None:
    op.drop_column("talent_import_runs", "scopes", schema="chessboard")
    op.drop_column("talent_import_pages", "claim_token", schema="chessboard")
    op.drop_column("talent_import_pages", "is_last", schema="chessboard")
    op.drop_column("talent_import_pages", "next_cursor", schema="chessboard")

"""talent import: per-developer counters of a page

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 22:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A page of an unfiltered walk mixes developers: its counters per tenant (the developer's PIN
    # id) give each developer partition its own figures (docs/talent-initial-import.md#result).
    op.add_column(
        "talent_import_pages",
        sa.Column(
            "tenant_counters",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        schema="chessboard",
    )


def downgrade() -> None:
    op.drop_column("talent_import_pages", "tenant_counters", schema="chessboard")

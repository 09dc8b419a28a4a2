"""analytics: chessboard_analytics.project_inventory_daily

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 22:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE SCHEMA IF NOT EXISTS chessboard_analytics")
    op.create_table(
        "project_inventory_daily",
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("free_count", sa.Numeric(), nullable=False),
        sa.Column("total_count", sa.Numeric(), nullable=False),
        sa.Column("sold_count", sa.Numeric(), nullable=False),
        sa.Column("reserved_count", sa.Numeric(), nullable=False),
        sa.Column("booked_count", sa.Numeric(), nullable=False),
        sa.Column("hidden_count", sa.Numeric(), nullable=False),
        sa.Column("price_min", sa.Numeric(), nullable=True),
        sa.Column("price_max", sa.Numeric(), nullable=True),
        sa.Column("price_median", sa.Numeric(), nullable=True),
        sa.Column("free_value", sa.Numeric(), nullable=False),
        sa.Column(
            "layouts_by_rooms",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("project_id", "day", name=op.f("pk_project_inventory_daily")),
        schema="chessboard_analytics",
    )
    op.create_index(
        "ix_project_inventory_daily_day",
        "project_inventory_daily",
        ["day"],
        unique=False,
        schema="chessboard_analytics",
    )


def downgrade() -> None:
    op.drop_index(
        "ix_project_inventory_daily_day", table_name="project_inventory_daily", schema="chessboard_analytics"
    )
    op.drop_table("project_inventory_daily", schema="chessboard_analytics")
    op.execute("DROP SCHEMA IF EXISTS chessboard_analytics")

"""metric samples: every process's counters, histograms and gauges, summed where metrics serve reads them

Revision ID: 0010_metric_samples
Revises: 0009_developer_partitions
Create Date: 2026-12-03 14:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_metric_samples"
down_revision = "0009_developer_partitions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a step pod lives for seconds and shares no disk: its samples go to the store
    # (docs/deployment.md#metrics)
    op.create_table(
        "metric_samples",
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("owner", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("kind", "key", "owner", name=op.f("pk_metric_samples")),
        schema="chessboard",
    )


def downgrade() -> None:
    op.drop_table("metric_samples", schema="chessboard")

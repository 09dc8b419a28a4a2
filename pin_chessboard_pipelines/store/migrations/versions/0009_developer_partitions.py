"""developer partitions: the talent_developers partition key of each developer, frozen at first sight

Revision ID: 0009_developer_partitions
Revises: 0008_handbook_sync
Create Date: 2026-12-03 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009_developer_partitions"
down_revision = "0008_handbook_sync"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # a rename in Talent keeps the developer's partition (docs/talent-initial-import.md#partitions)
    op.create_table(
        "developer_partitions",
        sa.Column("developer_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("partition_key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column(
            "first_seen_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("renamed_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("developer_id", name=op.f("pk_developer_partitions")),
        sa.UniqueConstraint("partition_key", name=op.f("uq_developer_partitions_partition_key")),
        schema="chessboard",
    )


def downgrade() -> None:
    op.drop_table("developer_partitions", schema="chessboard")

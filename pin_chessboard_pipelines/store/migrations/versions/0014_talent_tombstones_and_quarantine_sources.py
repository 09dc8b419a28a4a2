"""talent-sync: tombstones remembered with their position; quarantine rows keyed by their message

Revision ID: 0014_talent_tombstones
Revises: 0013_import_run_alive
Create Date: 2026-12-05 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0014_talent_tombstones"
down_revision = "0013_import_run_alive"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A tombstone carries no version: its position in the topic says what it supersedes
    # (docs/talent-source.md#deletes). Kept for keys without a replica row too (a new entity whose
    # snapshot was dead-lettered before its delete).
    op.create_table(
        "talent_tombstones",
        sa.Column("entity", sa.String(16), nullable=False),
        sa.Column("external_talent_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("source_partition", sa.Integer(), nullable=True),
        sa.Column("source_offset", sa.BigInteger(), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("entity", "external_talent_id", name=op.f("pk_talent_tombstones")),
        schema="chessboard",
    )
    # the message an item was read from: a batch read again after a crash quarantines nothing twice
    op.add_column(
        "talent_import_failed_items", sa.Column("source_topic", sa.String(255)), schema="chessboard"
    )
    op.add_column(
        "talent_import_failed_items", sa.Column("source_partition", sa.Integer()), schema="chessboard"
    )
    op.add_column(
        "talent_import_failed_items", sa.Column("source_offset", sa.BigInteger()), schema="chessboard"
    )
    op.create_index(
        "uq_talent_import_failed_items_source",
        "talent_import_failed_items",
        ["run_id", "source_topic", "source_partition", "source_offset"],
        unique=True,
        schema="chessboard",
    )


def downgrade() -> None:
    op.drop_index(
        "uq_talent_import_failed_items_source", table_name="talent_import_failed_items", schema="chessboard"
    )
    for column in ("source_offset", "source_partition", "source_topic"):
        op.drop_column("talent_import_failed_items", column, schema="chessboard")
    op.drop_table("talent_tombstones", schema="chessboard")

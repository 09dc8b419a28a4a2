"""talent import: the items the walker read of a page, staged until the page is Done

Revision ID: 0012_import_staged_pages
Revises: 0011_outbox_fillfactor
Create Date: 2026-12-03 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0012_import_staged_pages"
down_revision = "0011_outbox_fillfactor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A page is read from Talent once: a claimant in another process applies the walker's items
    # (docs/talent-initial-import.md#pages-read-once). UNLOGGED (no WAL): after a crash the table is
    # empty and a claimant reads the page by its cursor, as it did before.
    op.create_table(
        "talent_import_staged_pages",
        sa.Column("run_id", postgresql.UUID(as_uuid=True), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("page_id", sa.BigInteger(), nullable=False),
        sa.Column("items", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["page_id"],
            ["chessboard.talent_import_pages.id"],
            name=op.f("fk_talent_import_staged_pages_page_id"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "stage", "page_id", name=op.f("pk_talent_import_staged_pages")),
        schema="chessboard",
        prefixes=["UNLOGGED"],
    )
    # a page's items are read back once, whole: compressing them is CPU of the shared database for nothing
    op.execute("ALTER TABLE chessboard.talent_import_staged_pages ALTER COLUMN items SET STORAGE EXTERNAL")
    op.add_column("talent_import_pages", sa.Column("items_read_from", sa.String(8)), schema="chessboard")


def downgrade() -> None:
    op.drop_column("talent_import_pages", "items_read_from", schema="chessboard")
    op.drop_table("talent_import_staged_pages", schema="chessboard")

"""outbox_messages with fillfactor 50: marking a row published writes its new version on the same page

Revision ID: 0011_outbox_fillfactor
Revises: 0010_metric_samples
Create Date: 2026-12-03 15:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0011_outbox_fillfactor"
down_revision = "0010_metric_samples"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the relay's UPDATE of published_at is never HOT (the partial indexes name the column), but a
    # new version on its old page costs about half: no other page touched, a smaller WAL record
    # (benchmarks/outbox_bench.py; docs/events.md#outbox-and-relay). New pages only: old rows keep theirs.
    op.execute("ALTER TABLE chessboard.outbox_messages SET (fillfactor = 50)")


def downgrade() -> None:
    op.execute("ALTER TABLE chessboard.outbox_messages RESET (fillfactor)")

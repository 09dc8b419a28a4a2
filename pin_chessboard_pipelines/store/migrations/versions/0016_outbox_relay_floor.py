"""outbox_messages without indexes on published_at: the relay's mark is a HOT update; the relay
finds pending rows from chessboard.outbox_relay_floor up

Revision ID: 0016_outbox_relay_floor
Revises: 0015_import_run_worker
Create Date: 2026-12-06 04:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_outbox_relay_floor"
down_revision = "0015_import_run_worker"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Every row with an id below floor_id is published. The relay moves it up once every transaction
    # that could still write an id up to horizon_id has ended: horizon_id is the outbox sequence's
    # value read before horizon_xid was assigned (docs/events.md#outbox-and-relay). The first
    # advance after this migration walks the table once from 0.
    op.create_table(
        "outbox_relay_floor",
        sa.Column("id", sa.SmallInteger, primary_key=True, autoincrement=False),
        sa.Column("floor_id", sa.BigInteger, nullable=False),
        sa.Column("horizon_id", sa.BigInteger, nullable=False),
        sa.Column("horizon_xid", sa.BigInteger, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_outbox_relay_floor_one_row"),
        schema="chessboard",
    )
    op.execute(
        "INSERT INTO chessboard.outbox_relay_floor (id, floor_id, horizon_id, horizon_xid) VALUES (1, 0, 0, 0)"
    )
    # A writer has its transaction id before its first outbox id is drawn (a statement trigger
    # fires before the rows' defaults), so "every transaction below horizon_xid ended" covers
    # every id up to horizon_id.
    op.execute(
        """
        CREATE FUNCTION chessboard.outbox_writer_xid() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_current_xact_id();
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER outbox_writer_xid BEFORE INSERT ON chessboard.outbox_messages "
        "FOR EACH STATEMENT EXECUTE FUNCTION chessboard.outbox_writer_xid()"
    )
    # No btree names published_at: setting it is a HOT update (a new version on the row's page, no
    # index entry). The purge finds old published rows through a BRIN index, which does not stop HOT.
    op.drop_index("ix_outbox_messages_unpublished", table_name="outbox_messages", schema="chessboard")
    op.drop_index("ix_outbox_messages_published_at", table_name="outbox_messages", schema="chessboard")
    op.create_index(
        "ix_outbox_messages_published_at_brin",
        "outbox_messages",
        ["published_at"],
        schema="chessboard",
        postgresql_using="brin",
    )


def downgrade() -> None:
    op.drop_index("ix_outbox_messages_published_at_brin", table_name="outbox_messages", schema="chessboard")
    for name, column, predicate in (
        ("ix_outbox_messages_published_at", "published_at", "published_at IS NOT NULL"),
        ("ix_outbox_messages_unpublished", "id", "published_at IS NULL"),
    ):
        op.execute(f"CREATE INDEX {name} ON chessboard.outbox_messages ({column}) WHERE {predicate}")
    op.execute("DROP TRIGGER outbox_writer_xid ON chessboard.outbox_messages")
    op.execute("DROP FUNCTION chessboard.outbox_writer_xid()")
    op.drop_table("outbox_relay_floor", schema="chessboard")

"""handbook-sync: versions of the handbook replica, pending republishes, live-project indexes

Revision ID: 0008_handbook_sync
Revises: 0005
Create Date: 2026-12-01 22:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0008_handbook_sync"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the version guard of pin.handbook.regions.v1 / cities.v1 (docs/store.md#handbook-sync)
    for table in ("handbook_regions", "handbook_cities"):
        op.add_column(
            table,
            sa.Column("version", sa.BigInteger(), server_default="0", nullable=False),
            schema="chessboard",
        )
    # a city may arrive before its region: the handbook service owns that reference
    op.drop_constraint(
        "fk_handbook_cities_region_id", "handbook_cities", schema="chessboard", type_="foreignkey"
    )
    op.create_table(
        "handbook_republish",
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("handbook_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("handbook_version", sa.BigInteger(), nullable=False),
        sa.Column("after_project_id", postgresql.UUID(as_uuid=True), nullable=True),
        sa.Column("republished", sa.Integer(), server_default="0", nullable=False),
        sa.Column("batches", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "requested_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("kind IN ('region', 'city')", name=op.f("ck_handbook_republish_kind_known")),
        sa.PrimaryKeyConstraint("kind", "handbook_id", name=op.f("pk_handbook_republish")),
        schema="chessboard",
    )
    op.create_index(
        "ix_projects_region_live",
        "projects",
        ["region_id", "id"],
        schema="chessboard",
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.create_index(
        "ix_projects_city_live",
        "projects",
        ["city_id", "id"],
        schema="chessboard",
        postgresql_where=sa.text("deleted_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_projects_city_live", table_name="projects", schema="chessboard")
    op.drop_index("ix_projects_region_live", table_name="projects", schema="chessboard")
    op.drop_table("handbook_republish", schema="chessboard")
    op.create_foreign_key(
        "fk_handbook_cities_region_id",
        "handbook_cities",
        "handbook_regions",
        ["region_id"],
        ["id"],
        source_schema="chessboard",
        referent_schema="chessboard",
    )
    for table in ("handbook_regions", "handbook_cities"):
        op.drop_column(table, "version", schema="chessboard")

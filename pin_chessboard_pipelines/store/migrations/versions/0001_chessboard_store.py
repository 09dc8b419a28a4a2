"""chessboard store

Revision ID: 0001
Revises:
Create Date: 2026-11-30 12:22:34.599058
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from pin_chessboard_pipelines.store import handbook

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "developers",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("external_talent_id", sa.UUID(), nullable=False),
        sa.Column("sync_source", sa.String(length=32), server_default="TalentChessboard", nullable=False),
        sa.Column("replica_version", sa.BigInteger(), nullable=False),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("inn", sa.String(length=12), nullable=True),
        sa.Column("status", sa.String(length=32), server_default="Draft", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_developers")),
        sa.UniqueConstraint("external_talent_id", name=op.f("uq_developers_external_talent_id")),
        schema="chessboard",
    )
    op.create_table(
        "handbook_countries",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("iso_code", sa.String(length=3), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_handbook_countries")),
        schema="chessboard",
    )
    op.create_table(
        "handbook_currencies",
        sa.Column("id", sa.SmallInteger(), autoincrement=False, nullable=False),
        sa.Column("iso_code", sa.String(length=3), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("sign", sa.String(length=8), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_handbook_currencies")),
        schema="chessboard",
    )
    op.create_table(
        "outbox_messages",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("message_id", sa.UUID(), nullable=False),
        sa.Column("topic", sa.String(length=255), nullable=False),
        sa.Column("message_key", sa.String(length=255), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("headers", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("published_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox_messages")),
        sa.UniqueConstraint("message_id", name=op.f("uq_outbox_messages_message_id")),
        schema="chessboard",
    )
    op.create_index(
        "ix_outbox_messages_published_at",
        "outbox_messages",
        ["published_at"],
        unique=False,
        schema="chessboard",
        postgresql_where=sa.text("published_at IS NOT NULL"),
    )
    op.create_index(
        "ix_outbox_messages_unpublished",
        "outbox_messages",
        ["id"],
        unique=False,
        schema="chessboard",
        postgresql_where=sa.text("published_at IS NULL"),
    )
    op.create_table(
        "project_recalc_requests",
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("due_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested_count", sa.Integer(), server_default="1", nullable=False),
        sa.Column("last_reason", sa.String(length=32), nullable=False),
        sa.Column("attempt_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint(
            "attempt_count >= 0", name=op.f("ck_project_recalc_requests_attempt_count_not_negative")
        ),
        sa.CheckConstraint(
            "requested_count >= 1", name=op.f("ck_project_recalc_requests_requested_count_positive")
        ),
        sa.PrimaryKeyConstraint("project_id", name=op.f("pk_project_recalc_requests")),
        schema="chessboard",
    )
    op.create_index(
        "ix_project_recalc_due", "project_recalc_requests", ["due_at"], unique=False, schema="chessboard"
    )
    op.create_table(
        "talent_import_failed_items",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("external_id", sa.String(length=64), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=False),
        sa.Column("error_message", sa.String(length=1024), nullable=True),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_talent_import_failed_items")),
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_talent_import_failed_items_run_id"),
        "talent_import_failed_items",
        ["run_id"],
        unique=False,
        schema="chessboard",
    )
    op.create_table(
        "talent_import_runs",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("correlation_id", sa.String(length=64), nullable=False),
        sa.Column("dry_run", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("developer_id_filter", sa.UUID(), nullable=True),
        sa.Column("project_id_filter", sa.UUID(), nullable=True),
        sa.Column("page_size", sa.Integer(), nullable=False),
        sa.Column(
            "stage_counters",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("dagster_run_id", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_talent_import_runs")),
        schema="chessboard",
    )
    op.create_index(
        "ix_talent_import_runs_status", "talent_import_runs", ["status"], unique=False, schema="chessboard"
    )
    op.create_table(
        "handbook_regions",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("country_id", sa.SmallInteger(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["country_id"], ["chessboard.handbook_countries.id"], name=op.f("fk_handbook_regions_country_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_handbook_regions")),
        schema="chessboard",
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("external_talent_id", sa.UUID(), nullable=False),
        sa.Column("sync_source", sa.String(length=32), server_default="TalentChessboard", nullable=False),
        sa.Column("replica_version", sa.BigInteger(), nullable=False),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("developer_id", sa.UUID(), nullable=False),
        sa.Column("status", sa.String(length=32), server_default="Draft", nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("class", sa.String(length=32), nullable=False),
        sa.Column("construction_status", sa.String(length=32), nullable=False),
        sa.Column("country_id", sa.SmallInteger(), nullable=False),
        sa.Column("region_id", sa.BigInteger(), nullable=True),
        sa.Column("city_id", sa.BigInteger(), nullable=True),
        sa.Column("stars", sa.SmallInteger(), nullable=True),
        sa.Column("hotelier_id", sa.UUID(), nullable=True),
        sa.Column("currency_id", sa.SmallInteger(), nullable=False),
        sa.Column("payback_years", sa.Numeric(), nullable=True),
        sa.Column("cover_image_file_id", sa.UUID(), nullable=True),
        sa.Column("price_min", sa.Numeric(), nullable=True),
        sa.Column("price_max", sa.Numeric(), nullable=True),
        sa.Column("property_objects_total_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("property_objects_free_count", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["developer_id"], ["chessboard.developers.id"], name=op.f("fk_projects_developer_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("external_talent_id", name=op.f("uq_projects_external_talent_id")),
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_projects_developer_id"), "projects", ["developer_id"], unique=False, schema="chessboard"
    )
    op.create_table(
        "talent_import_pages",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.UUID(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("page_no", sa.Integer(), nullable=False),
        sa.Column("cursor", sa.Text(), nullable=True),
        sa.Column("scope", sa.String(length=64), server_default="", nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("items_planned", sa.Integer(), server_default="0", nullable=False),
        sa.Column("items_applied", sa.Integer(), server_default="0", nullable=False),
        sa.Column("items_skipped", sa.Integer(), server_default="0", nullable=False),
        sa.Column("items_failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_error", sa.String(length=1024), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["chessboard.talent_import_runs.id"], name=op.f("fk_talent_import_pages_run_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_talent_import_pages")),
        sa.UniqueConstraint("run_id", "stage", "scope", "page_no", name="uq_talent_import_pages_page"),
        schema="chessboard",
    )
    op.create_index(
        "ix_talent_import_pages_claim",
        "talent_import_pages",
        ["run_id", "stage", "status", "page_no"],
        unique=False,
        schema="chessboard",
    )
    op.create_table(
        "buildings",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("external_talent_id", sa.UUID(), nullable=False),
        sa.Column("sync_source", sa.String(length=32), server_default="TalentChessboard", nullable=False),
        sa.Column("replica_version", sa.BigInteger(), nullable=False),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("status", sa.String(length=32), server_default="Draft", nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("floors_count", sa.SmallInteger(), nullable=False),
        sa.Column("property_objects_total_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("property_objects_free_count", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["project_id"], ["chessboard.projects.id"], name=op.f("fk_buildings_project_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_buildings")),
        sa.UniqueConstraint("external_talent_id", name=op.f("uq_buildings_external_talent_id")),
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_buildings_project_id"), "buildings", ["project_id"], unique=False, schema="chessboard"
    )
    op.create_table(
        "handbook_cities",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("region_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["region_id"], ["chessboard.handbook_regions.id"], name=op.f("fk_handbook_cities_region_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_handbook_cities")),
        schema="chessboard",
    )
    op.create_table(
        "layout_groups",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("external_talent_id", sa.UUID(), nullable=False),
        sa.Column("sync_source", sa.String(length=32), server_default="TalentChessboard", nullable=False),
        sa.Column("replica_version", sa.BigInteger(), nullable=False),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("rooms", sa.SmallInteger(), nullable=False),
        sa.Column("layouts_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("area_min", sa.Numeric(), nullable=True),
        sa.Column("area_max", sa.Numeric(), nullable=True),
        sa.ForeignKeyConstraint(
            ["project_id"], ["chessboard.projects.id"], name=op.f("fk_layout_groups_project_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_layout_groups")),
        sa.UniqueConstraint("external_talent_id", name=op.f("uq_layout_groups_external_talent_id")),
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_layout_groups_project_id"),
        "layout_groups",
        ["project_id"],
        unique=False,
        schema="chessboard",
    )
    op.create_table(
        "layouts",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("external_talent_id", sa.UUID(), nullable=False),
        sa.Column("sync_source", sa.String(length=32), server_default="TalentChessboard", nullable=False),
        sa.Column("replica_version", sa.BigInteger(), nullable=False),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("layout_group_id", sa.UUID(), nullable=True),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("rooms", sa.SmallInteger(), nullable=False),
        sa.Column("total_area", sa.Numeric(), nullable=False),
        sa.Column("property_objects_count", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["layout_group_id"], ["chessboard.layout_groups.id"], name=op.f("fk_layouts_layout_group_id")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["chessboard.projects.id"], name=op.f("fk_layouts_project_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_layouts")),
        sa.UniqueConstraint("external_talent_id", name=op.f("uq_layouts_external_talent_id")),
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_layouts_layout_group_id"), "layouts", ["layout_group_id"], unique=False, schema="chessboard"
    )
    op.create_index(
        op.f("ix_layouts_project_id"), "layouts", ["project_id"], unique=False, schema="chessboard"
    )
    op.create_table(
        "property_objects",
        sa.Column("id", sa.UUID(), nullable=False),
        sa.Column("external_talent_id", sa.UUID(), nullable=False),
        sa.Column("sync_source", sa.String(length=32), server_default="TalentChessboard", nullable=False),
        sa.Column("replica_version", sa.BigInteger(), nullable=False),
        sa.Column("last_synced_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.BigInteger(), server_default="1", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tenant_id", sa.UUID(), nullable=False),
        sa.Column("project_id", sa.UUID(), nullable=False),
        sa.Column("building_id", sa.UUID(), nullable=False),
        sa.Column("layout_id", sa.UUID(), nullable=True),
        sa.Column("number", sa.String(length=32), nullable=False),
        sa.Column("floor", sa.SmallInteger(), nullable=False),
        sa.Column("section", sa.SmallInteger(), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("status_source", sa.String(length=32), server_default="TalentSync", nullable=False),
        sa.Column("price", sa.Numeric(), nullable=True),
        sa.Column("total_area", sa.Numeric(), nullable=True),
        sa.ForeignKeyConstraint(
            ["building_id"], ["chessboard.buildings.id"], name=op.f("fk_property_objects_building_id")
        ),
        sa.ForeignKeyConstraint(
            ["layout_id"], ["chessboard.layouts.id"], name=op.f("fk_property_objects_layout_id")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["chessboard.projects.id"], name=op.f("fk_property_objects_project_id")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_property_objects")),
        sa.UniqueConstraint("external_talent_id", name=op.f("uq_property_objects_external_talent_id")),
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_property_objects_building_id"),
        "property_objects",
        ["building_id"],
        unique=False,
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_property_objects_layout_id"),
        "property_objects",
        ["layout_id"],
        unique=False,
        schema="chessboard",
    )
    op.create_index(
        op.f("ix_property_objects_project_id"),
        "property_objects",
        ["project_id"],
        unique=False,
        schema="chessboard",
    )
    op.create_index(
        "uq_property_objects_live_number",
        "property_objects",
        ["building_id", "number"],
        unique=True,
        schema="chessboard",
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    _seed_handbook()


def _seed_handbook() -> None:
    """Reference data of the handbook replica (store/handbook.py)."""
    meta = sa.MetaData(schema="chessboard")
    for name, rows in (
        ("handbook_countries", handbook.COUNTRIES),
        ("handbook_regions", handbook.REGIONS),
        ("handbook_cities", handbook.CITIES),
        ("handbook_currencies", handbook.CURRENCIES),
    ):
        table = sa.Table(name, meta, autoload_with=op.get_bind())
        op.bulk_insert(table, rows)


def downgrade() -> None:
    op.drop_index(
        "uq_property_objects_live_number",
        table_name="property_objects",
        schema="chessboard",
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.drop_index(op.f("ix_property_objects_project_id"), table_name="property_objects", schema="chessboard")
    op.drop_index(op.f("ix_property_objects_layout_id"), table_name="property_objects", schema="chessboard")
    op.drop_index(op.f("ix_property_objects_building_id"), table_name="property_objects", schema="chessboard")
    op.drop_table("property_objects", schema="chessboard")
    op.drop_index(op.f("ix_layouts_project_id"), table_name="layouts", schema="chessboard")
    op.drop_index(op.f("ix_layouts_layout_group_id"), table_name="layouts", schema="chessboard")
    op.drop_table("layouts", schema="chessboard")
    op.drop_index(op.f("ix_layout_groups_project_id"), table_name="layout_groups", schema="chessboard")
    op.drop_table("layout_groups", schema="chessboard")
    op.drop_table("handbook_cities", schema="chessboard")
    op.drop_index(op.f("ix_buildings_project_id"), table_name="buildings", schema="chessboard")
    op.drop_table("buildings", schema="chessboard")
    op.drop_index("ix_talent_import_pages_claim", table_name="talent_import_pages", schema="chessboard")
    op.drop_table("talent_import_pages", schema="chessboard")
    op.drop_index(op.f("ix_projects_developer_id"), table_name="projects", schema="chessboard")
    op.drop_table("projects", schema="chessboard")
    op.drop_table("handbook_regions", schema="chessboard")
    op.drop_index("ix_talent_import_runs_status", table_name="talent_import_runs", schema="chessboard")
    op.drop_table("talent_import_runs", schema="chessboard")
    op.drop_index(
        op.f("ix_talent_import_failed_items_run_id"),
        table_name="talent_import_failed_items",
        schema="chessboard",
    )
    op.drop_table("talent_import_failed_items", schema="chessboard")
    op.drop_index("ix_project_recalc_due", table_name="project_recalc_requests", schema="chessboard")
    op.drop_table("project_recalc_requests", schema="chessboard")
    op.drop_index(
        "ix_outbox_messages_unpublished",
        table_name="outbox_messages",
        schema="chessboard",
        postgresql_where=sa.text("published_at IS NULL"),
    )
    op.drop_index(
        "ix_outbox_messages_published_at",
        table_name="outbox_messages",
        schema="chessboard",
        postgresql_where=sa.text("published_at IS NOT NULL"),
    )
    op.drop_table("outbox_messages", schema="chessboard")
    op.drop_table("handbook_currencies", schema="chessboard")
    op.drop_table("handbook_countries", schema="chessboard")
    op.drop_table("developers", schema="chessboard")

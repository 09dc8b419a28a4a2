"""The migrated schema is exactly the declared one, and `db upgrade` is idempotent."""

from __future__ import annotations

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from pin_chessboard_pipelines.store import handbook
from pin_chessboard_pipelines.store.migrate import current_revision, upgrade
from pin_chessboard_pipelines.store.tables import ANALYTICS_SCHEMA, SCHEMA, metadata


def _diff(engine) -> list:
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "include_schemas": True,
                "include_name": lambda name, type_, _: (
                    name in (SCHEMA, ANALYTICS_SCHEMA) if type_ == "schema" else True
                ),
                "compare_type": True,
                "compare_server_default": True,
                "version_table_schema": SCHEMA,
            },
        )
        return compare_metadata(context, metadata)


def test_migrated_schema_matches_the_models(engine):
    assert _diff(engine) == []


def test_upgrade_is_idempotent(db_url, engine):
    before = current_revision(db_url)
    upgrade(db_url)
    assert current_revision(db_url) == before is not None
    assert _diff(engine) == []


def test_contract_index_and_tables_exist(engine):
    inspector = sa.inspect(engine)
    tables = set(inspector.get_table_names(schema=SCHEMA))
    for name in (
        "developers",
        "projects",
        "buildings",
        "layout_groups",
        "layouts",
        "property_objects",
        "project_recalc_requests",
        "talent_import_runs",
        "talent_import_pages",
        "talent_import_failed_items",
        "outbox_messages",
    ):
        assert name in tables
    indexes = {ix["name"] for ix in inspector.get_indexes("project_recalc_requests", schema=SCHEMA)}
    assert "ix_project_recalc_due" in indexes


def test_handbook_is_seeded(engine):
    with engine.connect() as conn:
        rub = conn.execute(
            sa.text("SELECT iso_code FROM chessboard.handbook_currencies WHERE id = 643")
        ).scalar()
        russia = conn.execute(
            sa.text("SELECT name FROM chessboard.handbook_countries WHERE id = 643")
        ).scalar()
        cities = conn.execute(sa.text("SELECT count(*) FROM chessboard.handbook_cities")).scalar()
    assert rub == "RUB"
    assert russia == "Россия"
    assert cities == len(handbook.CITIES)


def test_the_staged_pages_are_unlogged_and_uncompressed(engine):
    # no WAL for items applied at most once, no compression of text read back whole once
    # (docs/talent-initial-import.md#pages-read-once)
    with engine.connect() as conn:
        persistence, storage = conn.execute(
            sa.text(
                "SELECT c.relpersistence, a.attstorage FROM pg_class AS c"
                " JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attname = 'items'"
                " WHERE c.oid = 'chessboard.talent_import_staged_pages'::regclass"
            )
        ).one()
    assert (persistence, storage) == ("u", "e")

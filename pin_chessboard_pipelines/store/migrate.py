"""`pin-chessboard db upgrade`: applies the Alembic migrations (idempotent)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text

from pin_chessboard_pipelines.store.engine import get_engine

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Serialises concurrent `db upgrade`s (several pods, CLI beside a run).
_MIGRATION_LOCK_KEY = 0x43484553_53424F41  # "CHESSBOA"


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    engine = get_engine(url)
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with get_engine(url).connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table_schema": "chessboard"})
        return context.get_current_revision()

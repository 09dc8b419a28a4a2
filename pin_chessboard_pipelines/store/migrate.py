"""`pin-chessboard db upgrade`: applies the Alembic migrations (idempotent)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.lock import AdvisoryLock

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Serialises concurrent `db upgrade`s (several pods, CLI beside a run).
MIGRATION_LOCK = AdvisoryLock("Pin:lock:job:chessboard-db-upgrade")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    engine = get_engine(url)
    with engine.begin() as conn:
        MIGRATION_LOCK.lock_transaction(conn)
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revision(url: str) -> str | None:
    with get_engine(url).connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table_schema": "chessboard"})
        return context.get_current_revision()

"""Where the services are: the configured ones, or the embedded defaults of `make demo`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.runtime.embedded import ensure_database, running_postgres, start_postgres
from pin_chessboard_pipelines.settings import PROJECT_ROOT, Settings
from pin_chessboard_pipelines.store.engine import get_engine, sqlalchemy_url, with_database

CHESSBOARD_DB = "chessboard"
DAGSTER_DB = "dagster"


def embedded_pg_dir(settings: Settings) -> Path:
    return settings.state_dir / "pgdata"


def missing_database_url() -> ConfigError:
    return ConfigError(
        "CHESSBOARD_DATABASE_URL is not set: expected a postgresql:// URL of the chessboard store"
    )


def database_url(settings: Settings) -> str:
    """CHESSBOARD_DATABASE_URL, or the `chessboard` database of the embedded PostgreSQL that a running
    `make demo` / `pin-chessboard dev` keeps in <state dir>/pgdata (README "Configuration"): attached
    to, never started. Neither: ConfigError (one line, exit 2)."""
    if settings.database_url:
        return settings.database_url
    running = running_postgres(embedded_pg_dir(settings))
    if running is None:
        raise missing_database_url()
    return with_database(running, CHESSBOARD_DB)


def store_engine(settings: Settings) -> Engine:
    """An engine of the chessboard store of `database_url(settings)`."""
    return get_engine(database_url(settings))


def embedded_database_url(settings: Settings) -> str:
    """The embedded PostgreSQL's `chessboard` database, the server started if needed and the
    database created if missing: `pin-chessboard dev` only."""
    return ensure_database(start_postgres(embedded_pg_dir(settings)), CHESSBOARD_DB)


def dagster_postgres_url(settings: Settings) -> str:
    """DAGSTER_POSTGRES_URL, or database `dagster` on the chessboard's server (created if missing)."""
    configured = os.environ.get("DAGSTER_POSTGRES_URL")
    if configured:
        return sqlalchemy_url(configured)
    return sqlalchemy_url(ensure_database(with_database(database_url(settings), "postgres"), DAGSTER_DB))


def prepare_dagster_home(settings: Settings) -> Path:
    """Makes DAGSTER_HOME hold the project's dagster.yaml (run storage in PostgreSQL) and sets the
    environment the instance reads; returns the folder."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        shutil.copyfile(PROJECT_ROOT / "dagster.yaml", target)
    os.environ["DAGSTER_HOME"] = str(home)
    # normalised here too, for a DAGSTER_HOME whose dagster.yaml predates store/dagster_storage.py
    os.environ["DAGSTER_POSTGRES_URL"] = dagster_postgres_url(settings)
    os.environ.setdefault("CHESSBOARD_DATABASE_URL", database_url(settings))
    return home

"""Dagster's run, event-log and schedule storage in PostgreSQL, reading its URL in any form.

dagster.yaml names this class instead of `storage: postgres:` so that every process of the
deployment (webserver, daemon, code servers, run workers, the CLI) accepts the natural
`postgresql://…` in DAGSTER_POSTGRES_URL: SQLAlchemy 2.1 reads that scheme as psycopg 3, which is not
installed, so the URL is normalised to `postgresql+psycopg2://` before dagster-postgres sees it.
"""

from __future__ import annotations

from typing import Any

from dagster_postgres import DagsterPostgresStorage
from dagster_postgres.utils import get_token_provider_from_config, pg_url_from_config

from pin_chessboard_pipelines.store.engine import sqlalchemy_url


class PostgresStorage(DagsterPostgresStorage):
    """dagster-postgres' storage; `postgres_url` / `postgres_db` as in `storage: postgres:`."""

    @classmethod
    def from_config_value(  # type: ignore[override]
        cls,
        inst_data: Any,  # Dagster's ConfigurableClassData, handed to the storage untouched
        config_value: Any,
    ) -> PostgresStorage:
        return cls(
            inst_data=inst_data,
            postgres_url=sqlalchemy_url(pg_url_from_config(config_value)),
            should_autocreate_tables=config_value.get("should_autocreate_tables", True),
            token_provider=get_token_provider_from_config(config_value),
        )

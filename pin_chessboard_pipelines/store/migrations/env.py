"""Alembic environment: runs the chessboard migrations on the connection given by migrate.py."""

from __future__ import annotations

from alembic import context

from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.store.tables import ANALYTICS_SCHEMA, SCHEMA, metadata

config = context.config


def include_name(name, type_, parent_names):
    if type_ == "schema":
        return name in (SCHEMA, ANALYTICS_SCHEMA)
    return True


def run_migrations_online() -> None:
    connection = config.attributes["connection"]
    connection.execute(queries("migrations")["create_schema"])
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table_schema=SCHEMA,
        include_schemas=True,
        include_name=include_name,
        compare_type=True,
        compare_server_default=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()

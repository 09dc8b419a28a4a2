"""A raw psycopg2 cursor on the caller's SQLAlchemy connection, for the bulk paths.

Same transaction as the caller's SQLAlchemy statements; the same named queries (a `TextClause`,
compiled once by SQLAlchemy's psycopg2 dialect), with identifiers quoted by the driver
(`with_identifiers`); uuid values go in and out as canonical strings; column values travel as one array literal per column; COPY for the outbox rows. Driver
errors surface as SQLAlchemy's exceptions (IntegrityError, OperationalError, ...), so callers catch
one family whatever the path.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypeAlias

import psycopg2
from psycopg2 import sql as pgsql
from psycopg2.extensions import new_type, register_type
from sqlalchemy import TextClause, text
from sqlalchemy.dialects.postgresql.psycopg2 import PGDialect_psycopg2
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

# A named query (store/queries.py), one with identifiers quoted by the driver (with_identifiers), or
# a statement SQLAlchemy compiled for psycopg2 already (the replica upserts, store/replica_upserts.py)
Statement: TypeAlias = TextClause | pgsql.Composable | str
_DIALECT = PGDialect_psycopg2()

_UUID_AS_TEXT = new_type((2950,), "PIN_UUID_TEXT", lambda value, cursor: value)


def begin(conn: Connection) -> None:
    """The raw cursor shares the caller's transaction; make sure SQLAlchemy knows there is one."""
    if not conn.in_transaction():
        conn.begin()


class Cursor:
    """`with Cursor(conn) as cur`: a psycopg2 cursor on `conn`'s DBAPI connection, closed on exit."""

    def __init__(self, conn: Connection) -> None:
        driver = conn.connection.driver_connection
        if driver is None:  # a closed or invalidated connection
            raise RuntimeError("the connection has no open database connection")
        self._cur = driver.cursor()
        register_type(_UUID_AS_TEXT, self._cur)  # over the uuid.UUID caster SQLAlchemy registers

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cur.close()

    def execute(self, statement: Statement, params: Mapping[str, Any]) -> None:
        sql = driver_text(statement) if isinstance(statement, TextClause) else statement
        try:
            self._cur.execute(sql, params)
        except psycopg2.Error as exc:
            shown = sql if isinstance(sql, str) else sql.as_string(self._cur)
            raise DBAPIError.instance(shown, None, exc, psycopg2.Error) from exc

    def copy(self, statement: TextClause, data: io.StringIO) -> None:
        """`COPY … FROM STDIN` / `TO STDOUT` (a statement without parameters) with `data`."""
        try:
            self._cur.copy_expert(statement.text, data)
        except psycopg2.Error as exc:
            raise DBAPIError.instance(statement.text, None, exc, psycopg2.Error) from exc

    def copy_out(self, query: TextClause, data: io.StringIO, options: str) -> None:
        """The rows of `query` (a statement without parameters) into `data`: `COPY (query) TO
        STDOUT WITH (options)`."""
        self.copy(text(f"COPY ({query.text}) TO STDOUT WITH ({options})"), data)

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._cur.fetchall()

    def fetch_rows(self) -> list[dict[str, Any]]:
        """The result as dicts by column name."""
        names = [d[0] for d in self._cur.description]
        return [dict(zip(names, row, strict=True)) for row in self._cur.fetchall()]


@functools.lru_cache(maxsize=1024)
def driver_text(statement: TextClause) -> str:
    """The statement as psycopg2 takes it (`%(name)s`, a literal `%` doubled), compiled once."""
    return str(statement.compile(dialect=_DIALECT))


def with_identifiers(statement: TextClause, **identifiers: str | Sequence[str]) -> pgsql.Composed:
    """The statement with each `{name}` placeholder replaced by an identifier the driver quotes: a
    string is one identifier, a sequence a comma-separated list of them."""
    quoted = {
        name: pgsql.Identifier(value)
        if isinstance(value, str)
        else pgsql.SQL(", ").join(pgsql.Identifier(v) for v in value)
        for name, value in identifiers.items()
    }
    return pgsql.SQL(driver_text(statement)).format(**quoted)


def copy_in(conn: Connection, sql: TextClause, lines: Sequence[str]) -> int:
    """One `COPY ... FROM STDIN` of text-format lines in the caller's transaction; the line count."""
    if not lines:
        return 0
    begin(conn)
    with Cursor(conn) as cur:
        cur.copy(sql, io.StringIO("".join(lines)))
    return len(lines)


def array_literal(values: Sequence[Any], text: bool = False) -> str:
    """A PostgreSQL array literal ('{…}') of the values, cast by the query (`CAST(:x AS uuid[])`).

    One string per column instead of one adapted parameter per value: psycopg2 quotes it once,
    which is several times cheaper than adapting a list element by element (see apply_bench).
    `text`: the values are strings, quoted and escaped; otherwise they are ids (canonical UUID
    strings), integers, decimals or datetimes, whose text needs no quoting."""
    if text:
        items = [
            "NULL" if v is None else '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values
        ]
    else:
        items = [
            "NULL" if v is None else f'"{v.isoformat()}"' if isinstance(v, datetime) else str(v)
            for v in values
        ]
    return "{" + ",".join(items) + "}"

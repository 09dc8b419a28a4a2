"""Named SQL queries kept in `store/sql/*.sql`, loaded once.

A file holds several queries, each introduced by a line `-- name: query_name`; the lines after it
up to the next `-- name:` are the statement. Bind parameters are written `:name` in every file;
`queries` hands them to SQLAlchemy, `cursor_queries` to a raw psycopg2 cursor (store/cursor.py).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from sqlalchemy import TextClause, text

SQL_DIR = Path(__file__).parent / "sql"
# `:name`, but neither the second colon of a `::type` cast nor a colon inside a word.
_BIND = re.compile(r"(?<![:\w]):(\w+)")


def parse_queries(source: str) -> dict[str, str]:
    queries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("-- name:"):
            name = stripped.removeprefix("-- name:").strip()
            if not name or name in queries:
                raise ValueError(f"query name {name!r} is empty or repeated")
            current = queries[name] = []
        elif current is not None and (current or (stripped and not stripped.startswith("--"))):
            # a query's leading comment lines are for the reader: the statement starts with its
            # keyword (which also names its span in traces, README "Traces")
            current.append(line)
    return {name: "\n".join(lines).strip().rstrip(";") for name, lines in queries.items()}


@cache
def _sources(file: str) -> dict[str, str]:
    return parse_queries((SQL_DIR / f"{file}.sql").read_text(encoding="utf-8"))


@cache
def queries(file: str) -> dict[str, TextClause]:
    """All queries of `store/sql/<file>.sql` by name, for SQLAlchemy's `conn.execute`."""
    return {name: text(sql) for name, sql in _sources(file).items()}


def pyformat(sql: str) -> str:
    """A `:name` statement in psycopg2's `%(name)s` style (literal `%` doubled)."""
    return _BIND.sub(r"%(\1)s", sql.replace("%", "%%"))


@cache
def cursor_queries(file: str) -> dict[str, str]:
    """The same queries as plain strings for a raw psycopg2 cursor (store/cursor.py): `%(name)s`."""
    return {name: pyformat(sql) for name, sql in _sources(file).items()}

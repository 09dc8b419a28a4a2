"""Named SQL queries kept in `store/sql/*.sql`, loaded once.

A file holds several queries, each introduced by a line `-- name: query_name`; the lines after it
up to the next `-- name:` are the statement. Bind parameters use SQLAlchemy's `:name` style.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from sqlalchemy import TextClause, text

SQL_DIR = Path(__file__).parent / "sql"


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
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip().rstrip(";") for name, lines in queries.items()}


@cache
def queries(file: str) -> dict[str, TextClause]:
    """All queries of `store/sql/<file>.sql` by name."""
    source = (SQL_DIR / f"{file}.sql").read_text(encoding="utf-8")
    return {name: text(sql) for name, sql in parse_queries(source).items()}


@cache
def raw_queries(file: str) -> dict[str, str]:
    """The same, as plain strings (for psycopg2 cursors, COPY and execute_values)."""
    return parse_queries((SQL_DIR / f"{file}.sql").read_text(encoding="utf-8"))

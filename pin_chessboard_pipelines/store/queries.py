"""Named SQL queries kept in `store/sql/*.sql`, loaded once.

A file holds several queries, each introduced by a line `-- name: query_name`; the lines after it
up to the next `-- name:` are the statement. One way to bind: parameters are written `:name` in
every file, a cast as `CAST(:name AS type)` (SQLAlchemy does not bind `:name::type`: the loader
refuses it); `queries` hands the statements to SQLAlchemy's `conn.execute` and to the raw cursor
of the bulk paths alike (store/cursor.py compiles them with SQLAlchemy's psycopg2 dialect). An
identifier (a table or column of entities.py, never input) is a `{name}` placeholder, quoted by
the driver (store/cursor.py `with_identifiers`).

A part that several queries of a file share (the aggregates' formulas of recalc.sql) is written
once after a line `-- fragment: fragment_name`, and stands in a query where a line says
`-- include: fragment_name`; a fragment is not a query of its own.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from sqlalchemy import TextClause, text

SQL_DIR = Path(__file__).parent / "sql"
# `:name::type`: a bind parameter that SQLAlchemy would leave unbound
_CAST_AFTER_BIND = re.compile(r"(?<![:\w]):\w+::")


def parse_queries(source: str) -> dict[str, str]:
    blocks: dict[str, list[str]] = {}
    fragments: set[str] = set()
    current: list[str] | None = None
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith(("-- name:", "-- fragment:")):
            kind, _, name = stripped.removeprefix("-- ").partition(":")
            name = name.strip()
            if not name or name in blocks:
                raise ValueError(f"query name {name!r} is empty or repeated")
            current = blocks[name] = []
            if kind == "fragment":
                fragments.add(name)
        elif current is not None and (
            current or (stripped and not stripped.startswith("--")) or stripped.startswith("-- include:")
        ):
            # a query's leading comment lines are for the reader: the statement starts with its
            # keyword (which also names its span in traces, README "Traces"), or with a fragment's
            current.append(line)

    def expanded(lines: list[str]) -> str:
        out = []
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("-- include:"):
                fragment = stripped.removeprefix("-- include:").strip()
                if fragment not in fragments:
                    raise ValueError(f"-- include: {fragment!r} names no fragment of the file")
                out.append("\n".join(blocks[fragment]).rstrip())
            else:
                out.append(line)
        return "\n".join(out).strip().rstrip(";")

    return {name: expanded(lines) for name, lines in blocks.items() if name not in fragments}


@cache
def _sources(file: str) -> dict[str, str]:
    return parse_queries((SQL_DIR / f"{file}.sql").read_text(encoding="utf-8"))


@cache
def queries(file: str) -> dict[str, TextClause]:
    """All queries of `store/sql/<file>.sql` by name, for `conn.execute` and `Cursor.execute`."""
    statements = _sources(file)
    for name, sql in statements.items():
        cast = _CAST_AFTER_BIND.search(sql)
        if cast:
            raise ValueError(
                f"store/sql/{file}.sql {name}: {cast.group(0)} is not bound; write CAST(:x AS type)"
            )
    return {name: text(sql) for name, sql in statements.items()}

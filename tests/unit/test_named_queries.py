"""One way to bind: every named query is `:name` with casts written `CAST(:x AS type)`, compiled
for the raw cursor by SQLAlchemy's psycopg2 dialect; identifiers are quoted by the driver."""

from __future__ import annotations

import pytest
from psycopg2 import sql as pgsql
from sqlalchemy import text

from pin_chessboard_pipelines.store.cursor import driver_text, with_identifiers
from pin_chessboard_pipelines.store.queries import SQL_DIR, parse_queries, queries


def test_every_named_query_loads_and_compiles_for_the_raw_cursor():
    files = sorted(path.stem for path in SQL_DIR.glob("*.sql"))
    assert len(files) >= 10
    for file in files:
        for name, statement in queries(file).items():
            compiled = driver_text(statement)
            for bind in statement.compile().params:
                assert f"%({bind})s" in compiled, (file, name, bind)


def test_a_cast_right_after_a_bind_parameter_is_refused_with_the_query_named(monkeypatch, tmp_path):
    (tmp_path / "bad.sql").write_text("-- name: broken\nSELECT :ids::uuid[]\n", encoding="utf-8")
    monkeypatch.setattr("pin_chessboard_pipelines.store.queries.SQL_DIR", tmp_path)
    with pytest.raises(ValueError, match=r"bad.sql broken: :ids:: is not bound; write CAST\(:x AS type\)"):
        queries("bad")


def test_percent_signs_and_casts_reach_the_driver_as_written():
    statement = text("SELECT CAST(:ids AS uuid[]) WHERE name LIKE 'a%' AND x = :x")
    assert driver_text(statement) == "SELECT CAST(%(ids)s AS uuid[]) WHERE name LIKE 'a%%' AND x = %(x)s"
    assert parse_queries("-- name: q\n-- a note\nSELECT 1;\n") == {"q": "SELECT 1"}


def _identifiers(composed) -> list[tuple[str, ...]]:
    """Every identifier in a psycopg2.sql composition, as the strings the driver will quote."""
    found = []
    for part in composed.seq:
        if isinstance(part, pgsql.Identifier):
            found.append(part.strings)
        elif isinstance(part, pgsql.Composed):
            found.extend(_identifiers(part))
    return found


def test_identifiers_are_quoted_by_the_driver_not_formatted_into_text():
    statement = text("SELECT {columns} FROM chessboard.{table} WHERE id = ANY(CAST(:ids AS uuid[]))")
    composed = with_identifiers(statement, table='we"ird', columns=["id", "name"])
    assert _identifiers(composed) == [("id",), ("name",), ('we"ird',)]
    texts = "".join(part.string for part in composed.seq if isinstance(part, pgsql.SQL))
    assert 'we"ird' not in texts and "%(ids)s" in texts


def test_a_fragment_stands_where_a_query_includes_it_and_is_no_query_of_its_own():
    source = (
        "-- fragment: live\n-- a note\nlive AS (SELECT 1 AS id),\n"
        "-- name: q\nWITH\n-- include: live\nx AS (SELECT id FROM live)\nSELECT * FROM x;\n"
    )
    assert parse_queries(source) == {
        "q": "WITH\nlive AS (SELECT 1 AS id),\nx AS (SELECT id FROM live)\nSELECT * FROM x"
    }
    with pytest.raises(ValueError, match="'nowhere' names no fragment"):
        parse_queries("-- name: q\nSELECT 1\n-- include: nowhere\n")

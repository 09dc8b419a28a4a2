"""The replica's upserts, written from the roles of a replica table's columns (entities.py `Role`).

One statement per table, compiled once: the batch's rows come as one array per parameter column
(`unnest ... WITH ORDINALITY`, applied in batch order), a create takes the snapshot's values and the
columns' defaults, a newer snapshot overwrites only the replica's fields under the version guard.
PIN-owned columns are never in the SET list. A newer snapshot whose published fields equal the
stored ones moves replica_version and last_synced_at only: version and updated_at stay, so the
caller publishes nothing (docs/store.md#replica-tables). `inserted` tells a create from a change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    String,
    Table,
    Text,
    and_,
    bindparam,
    case,
    cast,
    func,
    literal,
    select,
    tuple_,
)
from sqlalchemy import column as sql_column
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, insert

from pin_chessboard_pipelines.entities import ARCHIVED, ROLE, Role

# columns that arrive as arrays, one value per snapshot
PARAMETERS = frozenset(
    {Role.ID, Role.TALENT_ID, Role.REPLICA_VERSION, Role.SNAPSHOT, Role.CREATE_ONLY, Role.OWNER}
)
# compared old against new: a difference is a published change (version + 1)
PUBLISHED = frozenset({Role.SNAPSHOT, Role.STAMP})
# overwritten by every newer snapshot
OVERWRITTEN = frozenset({Role.REPLICA_VERSION, Role.SNAPSHOT, Role.STAMP, Role.SOURCE})
# `info` key of a replica table: False = its upsert returns no sync bookkeeping columns
RETURNS_BOOKKEEPING = "returns_bookkeeping"
BOOKKEEPING = frozenset({Role.REPLICA_VERSION, Role.SOURCE, Role.SYNCED_AT, Role.CREATED_AT, Role.UPDATED_AT})


def role(column: Column[Any]) -> Role:
    """A replica column's role; KeyError naming the column when it has none."""
    try:
        return Role(column.info[ROLE])
    except KeyError:
        raise KeyError(f"{column.table.name}.{column.name} has no replica role") from None


def columns_of(table: Table, roles: frozenset[Role]) -> tuple[Column[Any], ...]:
    return tuple(c for c in table.c if role(c) in roles)


def parameter_columns(table: Table) -> tuple[str, ...]:
    """The array parameters of the table's upsert, in table order."""
    return tuple(c.name for c in columns_of(table, PARAMETERS))


def text_columns(table: Table) -> frozenset[str]:
    """Parameters whose values are free text (quoted in array literals, store/cursor.py)."""
    return frozenset(c.name for c in columns_of(table, PARAMETERS) if isinstance(c.type, String))


@dataclass(frozen=True)
class Upsert:
    sql: str  # psycopg2's `%(name)s` style, for a raw cursor (store/cursor.py)
    constants: Mapping[str, Any]  # the statement's own values (defaults, 0, 1): bound with the arrays

    def parameters(self, arrays: Mapping[str, str]) -> dict[str, Any]:
        """The statement's parameters: its constants and one array literal per parameter column."""
        return {**self.constants, **arrays}


def upsert_statement(table: Table) -> Any:
    """INSERT ... SELECT FROM unnest(...) ON CONFLICT (external_talent_id) DO UPDATE ... WHERE guard."""
    params = columns_of(table, PARAMETERS)
    rows = (
        func.unnest(*(cast(bindparam(c.name), _array_type(c)) for c in params))
        .table_valued(*(c.name for c in params), with_ordinality="ord")
        .render_derived(name="u")
    )
    values: dict[str, ColumnElement[Any]] = {}
    for c in table.c:
        r = role(c)
        if r in PARAMETERS:
            values[c.name] = rows.c[c.name]
        elif r is Role.SYNCED_AT:
            values[c.name] = func.now()
        elif r is Role.ARCHIVE:
            values[c.name] = case(
                (rows.c.deleted_at.is_(None), literal(_default(c))), else_=literal(ARCHIVED)
            )
        # the others take their column's default on create
    stmt = insert(table).from_select(list(values), select(*values.values()).order_by(rows.c.ord))
    new = stmt.excluded
    published = columns_of(table, PUBLISHED)
    changed = tuple_(*published).is_distinct_from(tuple_(*(new[c.name] for c in published)))
    update: dict[str, ColumnElement[Any]] = {}
    for c in table.c:
        r = role(c)
        if r in OVERWRITTEN:
            update[c.name] = new[c.name]
        elif r is Role.SYNCED_AT:
            update[c.name] = func.now()
        elif r is Role.UPDATED_AT:
            update[c.name] = case((changed, func.now()), else_=c)
        elif r is Role.VERSION:
            update[c.name] = c + case((changed, 1), else_=0)
        elif r is Role.ARCHIVE:  # Archived stays Archived (* -> Archived is the last transition)
            update[c.name] = case((new.deleted_at.is_not(None), ARCHIVED), else_=c)
    version = columns_of(table, frozenset({Role.REPLICA_VERSION}))[0]
    guard = and_(
        version < new[version.name], *(c == new[c.name] for c in columns_of(table, frozenset({Role.OWNER})))
    )
    returned = (
        table.c
        if table.info.get(RETURNS_BOOKKEEPING, True)
        else columns_of(table, frozenset(Role) - BOOKKEEPING)
    )
    return stmt.on_conflict_do_update(
        index_elements=list(columns_of(table, frozenset({Role.TALENT_ID}))), set_=update, where=guard
    ).returning(*returned, (sql_column("xmax") == 0).label("inserted"))


@cache
def replica_upsert(table: Table) -> Upsert:
    """The table's upsert, compiled once."""
    compiled = upsert_statement(table).compile(dialect=postgresql.psycopg2.dialect())
    arrays = set(parameter_columns(table))
    constants = {name: value for name, value in compiled.params.items() if name not in arrays}
    return Upsert(compiled.string, constants)


def _array_type(c: Column[Any]) -> ARRAY[Any]:
    # free text as text[]: an explicit cast to varchar(n) would cut a longer value instead of failing
    return ARRAY(Text() if isinstance(c.type, String) else c.type)


def _default(c: Column[Any]) -> Any:
    default = c.server_default
    return getattr(default, "arg", None)

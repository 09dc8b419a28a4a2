"""All store I/O of the analytics: one COPY read per day, one DELETE + COPY write per day, the
drift gate's query. The computations are analytics/inventory.py's."""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import date, datetime
from uuid import UUID

import pandas as pd
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.analytics.inventory import (
    LAYOUT_COLUMNS,
    OBJECT_COLUMNS,
    PROJECT_COLUMNS,
    TABLE_COLUMNS,
)
from pin_chessboard_pipelines.recalc.audit import Divergence, audit
from pin_chessboard_pipelines.store.cursor import Cursor, begin
from pin_chessboard_pipelines.store.queries import queries

_DTYPES = {
    "kind": "category",
    "n": "int64",
    "project_id": "str",
    "tenant_id": "str",
    "name": "str",
    "status": "category",
    "price_units": "Int64",
    "price_scale": "Int16",
    "rooms": "Int16",
}


@dataclass(frozen=True)
class InventoryInput:
    """The replica rows of one day's inventory (inventory.py's input frames)."""

    projects: pd.DataFrame
    objects: pd.DataFrame
    layouts: pd.DataFrame
    read_bytes: int


def read_inventory_input(conn: Connection) -> InventoryInput:
    """One statement (`inventory_rows`) streamed by COPY into one CSV buffer, parsed by pandas."""
    buffer = io.StringIO()
    with Cursor(conn) as cur:
        cur.copy_out(queries("analytics")["inventory_rows"], buffer, "FORMAT csv, HEADER")
    size = buffer.tell()  # characters: bytes for the ASCII of ids, numbers and statuses
    buffer.seek(0)
    try:
        rows = pd.read_csv(buffer, dtype=_DTYPES, keep_default_na=False, na_values=[""])
    except (OverflowError, ValueError):  # a price beyond int64 units: exact Python ints instead
        buffer.seek(0)
        rows = pd.read_csv(
            buffer, dtype={**_DTYPES, "price_units": "object"}, keep_default_na=False, na_values=[""]
        )
        rows["price_units"] = [None if pd.isna(u) else int(u) for u in rows["price_units"]]
    kind = rows["kind"]
    return InventoryInput(
        projects=rows.loc[kind == "p", list(PROJECT_COLUMNS)].reset_index(drop=True),
        objects=rows.loc[kind == "o", list(OBJECT_COLUMNS)].reset_index(drop=True),
        layouts=rows.loc[kind == "l", list(LAYOUT_COLUMNS)].reset_index(drop=True),
        read_bytes=size,
    )


def replace_inventory_day(conn: Connection, day: date, frame: pd.DataFrame) -> int:
    """That day's rows only are replaced, in the caller's transaction; COPY, not row inserts."""
    begin(conn)
    conn.execute(queries("analytics")["delete_inventory_day"], {"day": day})
    buffer = io.StringIO()
    frame.loc[:, list(TABLE_COLUMNS)].to_csv(buffer, header=False, index=False)
    buffer.seek(0)
    with Cursor(conn) as cur:
        cur.copy(queries("analytics")["copy_inventory_day"], buffer)
    return len(frame)


def read_inventory_day(conn: Connection, day: date) -> pd.DataFrame:
    rows = conn.execute(queries("analytics")["inventory_day"], {"day": day}).mappings().all()
    return pd.DataFrame([dict(r) for r in rows], columns=list(TABLE_COLUMNS))


def recorded_at(conn: Connection, day: date) -> datetime | None:
    """When the stored rows of `day` were computed (None: no row)."""
    return conn.execute(queries("analytics")["inventory_day_recorded_at"], {"day": day}).scalar()


def drift(conn: Connection) -> list[Divergence]:
    """The recalc audit's divergences without the pending ones: a project with a row in the recalc
    queue is not drift (docs/project-aggregates-recalc.md#audit)."""
    pending = {UUID(str(row[0])) for row in conn.execute(queries("analytics")["pending_recalc_projects"])}
    return [d for d in audit(conn) if d.project_id not in pending]

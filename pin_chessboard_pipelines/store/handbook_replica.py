"""Reads the handbook replica (chessboard.handbook_*) into the display snapshots events carry."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.store.tables import (
    handbook_cities,
    handbook_countries,
    handbook_currencies,
    handbook_regions,
)


def load_handbook(conn: Connection) -> Handbook:
    def by_id(table) -> dict:
        return {row["id"]: dict(row) for row in conn.execute(select(table)).mappings()}

    return Handbook(
        countries=by_id(handbook_countries),
        regions=by_id(handbook_regions),
        cities=by_id(handbook_cities),
        currencies=by_id(handbook_currencies),
    )

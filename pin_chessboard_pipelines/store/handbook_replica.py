"""Reads the handbook replica (chessboard.handbook_*) into the display snapshots events carry, and
the locks of handbook-sync (docs/store.md#handbook-sync).

HANDBOOK_CHANGE_LOCK orders a rename against the other producers of project-upserted: the
transaction that changes a name holds it exclusively, a producer that reads the handbook for the
events of its transaction holds it shared (`load_handbook_for_publish`), so no event written after
a rename committed carries the name from before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.store.lock import AdvisoryLock
from pin_chessboard_pipelines.store.tables import (
    handbook_cities,
    handbook_countries,
    handbook_currencies,
    handbook_regions,
)

HANDBOOK_SYNC_LOCK = AdvisoryLock("Pin:lock:job:chessboard-handbook-sync")  # one consumer at a time
HANDBOOK_CHANGE_LOCK = AdvisoryLock("Pin:lock:chessboard-handbook-change")  # transaction-level


@dataclass(frozen=True)
class Handbook:
    """The handbook replica's display snapshots, keyed by id (loaded once per job)."""

    countries: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    regions: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    cities: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    currencies: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)

    def country_snapshot(self, country_id: int) -> dict[str, Any] | None:
        row = self.countries.get(country_id)
        return None if row is None else {"id": country_id, "name": row["name"], "isoCode": row["iso_code"]}

    def region_snapshot(self, region_id: int | None) -> dict[str, Any] | None:
        row = None if region_id is None else self.regions.get(region_id)
        return None if row is None else {"id": region_id, "name": row["name"]}

    def city_snapshot(self, city_id: int | None) -> dict[str, Any] | None:
        row = None if city_id is None else self.cities.get(city_id)
        return None if row is None else {"id": city_id, "name": row["name"]}

    def currency_snapshot(self, currency_id: int) -> dict[str, Any] | None:
        row = self.currencies.get(currency_id)
        if row is None:
            return None
        return {"id": currency_id, "isoCode": row["iso_code"], "name": row["name"], "sign": row["sign"]}


def load_handbook(conn: Connection) -> Handbook:
    def by_id(table) -> dict:
        return {row["id"]: dict(row) for row in conn.execute(select(table)).mappings()}

    return Handbook(
        countries=by_id(handbook_countries),
        regions=by_id(handbook_regions),
        cities=by_id(handbook_cities),
        currencies=by_id(handbook_currencies),
    )


def load_handbook_for_publish(conn: Connection) -> Handbook:
    """The handbook inside the caller's transaction, with HANDBOOK_CHANGE_LOCK held shared until it
    ends: a rename waits for this transaction, and this one reads the names a rename committed."""
    HANDBOOK_CHANGE_LOCK.lock_transaction_shared(conn)
    return load_handbook(conn)

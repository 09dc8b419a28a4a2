"""Reads the handbook replica (chessboard.handbook_*) into the display snapshots events carry, and
the locks of handbook-sync (docs/store.md#handbook-sync).

HANDBOOK_CHANGE_LOCK orders a rename against the other producers of project-upserted: the
transaction that changes a name holds it exclusively, and every producer's publishing transaction
(talent-sync's batch, a recalc's project, an import's or a replay's page) holds it shared before it
reads the handbook, as its first statement (`HandbookCache.for_publish`, `load_handbook_for_publish`).
A rename that committed first is read by that transaction; one that comes later waits for it to
commit, and republishes after it. So no event written after a rename committed carries the name
from before it, however long the producer runs: a long-lived one (a recalc slot, an import step)
keeps its handbook between transactions and reads it again only when its stamp (the regions' and
cities' count and sum of versions, which only grow) changed.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.store.lock import AdvisoryLock
from pin_chessboard_pipelines.store.queries import queries
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
    """The handbook replica's display snapshots, keyed by id, and the stamp they were read at."""

    countries: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    regions: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    cities: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    currencies: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    stamp: tuple[int, ...] = ()

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


def handbook_stamp(conn: Connection) -> tuple[int, ...]:
    """What a change of handbook-sync changes: the regions' and cities' count and sum of versions."""
    return tuple(int(value) for value in conn.execute(queries("handbook")["handbook_stamp"]).one())


def load_handbook(conn: Connection) -> Handbook:
    def by_id(table) -> dict:
        return {row["id"]: dict(row) for row in conn.execute(select(table)).mappings()}

    stamp = handbook_stamp(conn)  # first: a change that lands meanwhile makes the next look re-read
    return Handbook(
        countries=by_id(handbook_countries),
        regions=by_id(handbook_regions),
        cities=by_id(handbook_cities),
        currencies=by_id(handbook_currencies),
        stamp=stamp,
    )


def load_handbook_for_publish(conn: Connection) -> Handbook:
    """The handbook inside the caller's transaction, with HANDBOOK_CHANGE_LOCK held shared until it
    ends: a rename waits for this transaction, and this one reads the names a rename committed."""
    HANDBOOK_CHANGE_LOCK.lock_transaction_shared(conn)
    return load_handbook(conn)


class HandbookCache:
    """The handbook of a long-lived producer (a drain slot, an import step, talent-sync), shared by
    its threads: each publishing transaction gets it through `for_publish`."""

    def __init__(self, handbook: Handbook | None = None) -> None:
        self._handbook = handbook
        self._lock = threading.Lock()

    def for_publish(self, conn: Connection) -> Handbook:
        """The handbook inside the caller's transaction, with HANDBOOK_CHANGE_LOCK held shared until
        it ends (call it first, before the transaction locks rows, as handbook-sync takes the lock
        before its rows): the one kept, when its stamp is still the replica's, else read again."""
        HANDBOOK_CHANGE_LOCK.lock_transaction_shared(conn)
        stamp = handbook_stamp(conn)
        with self._lock:
            if self._handbook is None or self._handbook.stamp != stamp:
                self._handbook = load_handbook(conn)
            return self._handbook

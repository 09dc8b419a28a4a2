"""chessboard.metric_samples: the sink every process flushes its metric samples to, and what
`metrics serve` reads (observability/samples.py says when a process flushes)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from functools import cache

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.observability.samples import LIVE_SECONDS, Key
from pin_chessboard_pipelines.store.engine import get_engine, ping_when_idle, sqlalchemy_url
from pin_chessboard_pipelines.store.queries import queries


class StoreSink:
    """observability.samples.Sink on the chessboard store: a flush is one statement on a
    connection of its own (never inside a job's transaction)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine: Engine | None = None
        self._pid = 0

    def _connect(self) -> Engine:
        if self._engine is None or self._pid != os.getpid():  # a forked child opens its own
            self._engine = ping_when_idle(
                sa.create_engine(sqlalchemy_url(self.url), pool_size=1, max_overflow=1)
            )
            self._pid = os.getpid()
        return self._engine

    def write(
        self, owner: str, added: Mapping[Key, float], maxed: Mapping[Key, float], live: Mapping[Key, float]
    ) -> None:
        rows = [
            {"kind": k, "key": key, "owner": "", "value": v}
            for (k, key), v in (*added.items(), *maxed.items())
        ]
        rows += [{"kind": k, "key": key, "owner": owner, "value": v} for (k, key), v in live.items()]
        with self._connect().begin() as conn:
            conn.execute(queries("metric_samples")["write_samples"], {"rows": json.dumps(rows)})

    def forget(self, owner: str) -> None:
        with self._connect().begin() as conn:
            conn.execute(queries("metric_samples")["forget_owner"], {"owner": owner})


@cache
def store_sink(url: str) -> StoreSink:
    """One sink per store and process (a step installs it again for each run it serves)."""
    return StoreSink(url)


class DeferredStoreSink:
    """A sink whose store is found at the first flush (the CLI: a command that records nothing,
    `talent-sim serve` say, needs no database)."""

    def __init__(self, url_of: Callable[[], str]) -> None:
        self.url_of = url_of

    def write(
        self, owner: str, added: Mapping[Key, float], maxed: Mapping[Key, float], live: Mapping[Key, float]
    ) -> None:
        store_sink(self.url_of()).write(owner, added, maxed, live)

    def forget(self, owner: str) -> None:
        store_sink(self.url_of()).forget(owner)


def read_samples(url: str, live_seconds: float = LIVE_SECONDS) -> list[tuple[str, str, float]]:
    with get_engine(url).connect() as conn:
        result = conn.execute(queries("metric_samples")["read_samples"], {"live_seconds": live_seconds})
        return [(kind, key, float(value)) for kind, key, value in result]


def prune_live(url: str, older_than_seconds: float = 10 * LIVE_SECONDS) -> int:
    with get_engine(url).begin() as conn:
        result = conn.execute(
            queries("metric_samples")["prune_live"], {"older_than_seconds": older_than_seconds}
        )
        return result.rowcount

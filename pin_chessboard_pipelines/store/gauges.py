"""The store gauges of `metrics serve` (observability/exporter.py): one named query each."""

from __future__ import annotations

from pin_chessboard_pipelines.observability.exporter import (
    PROCESS_RECENT_SECONDS,
    STORE_GAUGES,
    THROUGHPUT_WINDOW_SECONDS,
)
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.queries import queries


def read_store_gauges(
    url: str, poison_attempts: int, import_lock_key: int, alive_seconds: float = 90.0
) -> dict[str, float]:
    """`alive_seconds`: a Running import run is live while a heartbeat of its run worker is this
    fresh (recalc.queue.IMPORT_RUN_ALIVE_SECONDS; the same rule holds its recalc requests)."""
    params = {
        "poison_attempts": poison_attempts,
        "import_lock_key": import_lock_key,
        "alive_seconds": float(alive_seconds),
        "window_seconds": THROUGHPUT_WINDOW_SECONDS,
        "recent_seconds": PROCESS_RECENT_SECONDS,
    }
    with get_engine(url).connect() as conn:
        return {
            gauge.name: float(conn.execute(queries(gauge.file)[gauge.query], params).scalar_one())
            for gauge in STORE_GAUGES
        }

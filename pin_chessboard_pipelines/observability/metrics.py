"""The jobs' metrics, in one registry, exported in Prometheus format by `pin-chessboard metrics serve`.

Dagster runs are separate processes, so counters use prometheus_client's multi-process mode: every
process writes to files under PROMETHEUS_MULTIPROC_DIR (default `<state dir>/metrics`), and the
exporter sums them. Gauges that describe the store (queue depth, backlog, outbox lag) are read from
PostgreSQL at scrape time by observability/exporter.py instead.
"""

from __future__ import annotations

import os
from pathlib import Path


def _multiproc_dir() -> str:
    configured = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if configured:
        return configured
    from pin_chessboard_pipelines.settings import load_settings

    path = Path(os.environ.get("PIN_CHESSBOARD_STATE_DIR") or load_settings({}).state_dir) / "metrics"
    return str(path)


def multiproc_dir() -> str:
    return os.environ["PROMETHEUS_MULTIPROC_DIR"]


# prometheus_client picks its value store when imported: the directory must be known first.
os.environ["PROMETHEUS_MULTIPROC_DIR"] = _multiproc_dir()
Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)

from prometheus_client import Counter, Gauge, Histogram  # noqa: E402

# talent-initial-import (docs/talent-initial-import.md#metrics-logs-and-alerts)
IMPORT_RUNNING = Gauge(
    "chessboard_import_running", "1 while a talent initial import runs", multiprocess_mode="max"
)
IMPORT_PAGES = Counter(
    "chessboard_import_pages_total", "Import pages by stage and status", ["stage", "status"]
)
IMPORT_ITEMS = Counter(
    "chessboard_import_items_total", "Import items by aggregate and result", ["aggregate", "result"]
)
IMPORT_PAGE_DURATION = Histogram(
    "chessboard_import_page_duration_ms",
    "Duration of one import page (fetch + apply), milliseconds",
    buckets=(10, 25, 50, 100, 250, 500, 1000, 2000, 3000, 5000, 10000, 30000),
)
IMPORT_THROUGHPUT = Gauge(
    "chessboard_import_throughput_items_per_sec",
    "Items per second of the last import stage",
    multiprocess_mode="max",
)
IMPORT_FAILED_ITEMS = Counter("chessboard_import_failed_items_total", "Quarantined import items")
SYNC_UNKNOWN_ENUM = Counter(
    "chessboard_sync_unknown_enum_total",
    "Enum values outside the contract, replaced by the fallback",
    ["enum", "value"],
)
SYNC_UNRESOLVED_REFERENCE = Counter(
    "chessboard_sync_unresolved_reference_total", "Region/city ids the handbook does not know", ["reference"]
)

# project-aggregates-recalc (docs/project-aggregates-recalc.md#metrics-logs-and-alerts)
RECALC_PROCESS_DURATION = Histogram(
    "chessboard_recalc_process_duration_seconds",
    "Recalc of one project",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
)
RECALC_RUNS = Counter("chessboard_recalc_runs_total", "Project recalcs by result", ["result"])
RECALC_COALESCED = Counter("chessboard_recalc_coalesced_events_total", "Σ RequestedCount of drained rows")
RECALC_REPUBLISHED = Counter("chessboard_recalc_republished_total", "Snapshot events republished", ["entity"])
RECALC_LAG = Histogram(
    "chessboard_recalc_event_lag_seconds",
    "From the first request of a queue row to the commit of its recalc",
    buckets=(1, 5, 10, 20, 30, 40, 60, 120, 300, 600),
)
RECALC_POISON = Counter(
    "chessboard_recalc_poison_total",
    "Queue rows that reached the poison threshold (CHESSBOARD_RECALC_POISON)",
)
RECALC_TICKS = Counter("chessboard_recalc_ticks_total", "Evaluations of the recalc drain sensor")
RECALC_LAST_TICK = Gauge(
    "chessboard_recalc_last_tick_timestamp_seconds",
    "Unix time of the last recalc sensor evaluation (liveness)",
    multiprocess_mode="max",
)

# outbox relay
OUTBOX_PUBLISHED = Counter(
    "chessboard_outbox_published_total", "Outbox messages acknowledged by Kafka", ["topic"]
)
OUTBOX_PUBLISH_ERRORS = Counter("chessboard_outbox_publish_errors_total", "Failed relay attempts")

# talent-chessboard-sync (streaming consumer; docs/talent-source.md#streaming-sync)
TALENT_SYNC_MESSAGES = Counter(
    "chessboard_talent_sync_messages_total",
    "Talent topic messages applied by the streaming sync, by stage and result",
    ["stage", "result"],
)
TALENT_SYNC_LAG = Gauge(
    "chessboard_talent_sync_lag_messages",
    "Messages of the Talent topics not yet applied by the streaming sync (last measured)",
    multiprocess_mode="mostrecent",
)

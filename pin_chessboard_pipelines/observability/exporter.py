"""`pin-chessboard metrics serve --port P`: the jobs' metrics in Prometheus text format.

Counters and histograms come from every process that ran a job (multi-process files, see
metrics.py); gauges that describe the store are read from PostgreSQL at each scrape.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from pin_chessboard_pipelines.observability import metrics
from pin_chessboard_pipelines.runtime.services import database_url
from pin_chessboard_pipelines.settings import load_settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.queries import queries

log = logging.getLogger(__name__)

# metric name -> (help, store/sql/<file>.sql, named query)
STORE_GAUGES: dict[str, tuple[str, str, str]] = {
    "chessboard_recalc_queue_depth": ("Rows in project_recalc_requests", "recalc", "queue_depth"),
    "chessboard_recalc_due_backlog": ("Recalc rows already due (due_at <= now)", "recalc", "due_backlog"),
    "chessboard_recalc_poison_rows": (
        "Recalc rows with attempt_count >= the poison threshold",
        "recalc",
        "poison_count",
    ),
    "chessboard_outbox_backlog": ("Outbox rows not yet acknowledged by Kafka", "metrics", "outbox_backlog"),
    "chessboard_outbox_lag_seconds": (
        "Age of the oldest unpublished outbox row",
        "metrics",
        "outbox_lag_seconds",
    ),
    "chessboard_import_runs_running": (
        "talent_import_runs rows in status Running",
        "metrics",
        "import_running",
    ),
}


class StoreGaugeCollector(Collector):
    def __init__(self, url: str, poison_attempts: int) -> None:
        self.url = url
        self.poison_attempts = poison_attempts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("chessboard_store_up", "1 when the store answered the last scrape")
        try:
            with get_engine(self.url).connect() as conn:
                values = {
                    metric: float(
                        conn.execute(
                            queries(file)[query], {"poison_attempts": self.poison_attempts}
                        ).scalar_one()
                    )
                    for metric, (_, file, query) in STORE_GAUGES.items()
                }
        except Exception as error:  # a scrape must not fail: report the store as down
            log.warning("store gauges unavailable: %s", type(error).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for metric, (help_text, _, _) in STORE_GAUGES.items():
            gauge = GaugeMetricFamily(metric, help_text)
            gauge.add_metric([], values[metric])
            yield gauge


def build_registry(url: str, poison_attempts: int) -> CollectorRegistry:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=metrics.multiproc_dir())
    registry.register(StoreGaugeCollector(url, poison_attempts))
    return registry


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("metrics", help="Prometheus exposition of the seeds' metrics")
    commands = parser.add_subparsers(dest="metrics_command", required=True)
    serve = commands.add_parser("serve", help="serve /metrics until Ctrl-C")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    settings = load_settings()
    registry = build_registry(database_url(settings), settings.recalc_poison_attempts)
    server, thread = start_http_server(args.port, addr=args.host, registry=registry)
    print(f"metrics on http://{args.host}:{args.port}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    thread.join()
    return 0

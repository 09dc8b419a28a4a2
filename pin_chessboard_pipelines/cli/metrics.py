"""`pin-chessboard metrics serve --port P`: the project's metrics in Prometheus text format."""

from __future__ import annotations

import argparse
import signal
import threading

# Dead processes' files are compacted at each scrape, and this often without one.
COMPACT_EVERY_SECONDS = 30.0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("metrics", help="Prometheus exposition of the project's metrics")
    commands = parser.add_subparsers(dest="metrics_command", required=True)
    serve = commands.add_parser("serve", help="serve /metrics until Ctrl-C")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from functools import partial

    from prometheus_client import start_http_server

    from pin_chessboard_pipelines.observability import multiprocess
    from pin_chessboard_pipelines.observability.exporter import build_registry
    from pin_chessboard_pipelines.recalc.queue import IMPORT_RUN_ALIVE_SECONDS
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.settings import load_settings
    from pin_chessboard_pipelines.store.gauges import read_store_gauges
    from pin_chessboard_pipelines.talent_import.lock import LOCK as IMPORT_LOCK

    settings = load_settings()
    folder = settings.metrics_dir
    read = partial(
        read_store_gauges,
        database_url(settings),
        settings.recalc_poison_attempts,
        IMPORT_LOCK.key,
        IMPORT_RUN_ALIVE_SECONDS,
    )
    registry = build_registry(folder, read)
    server, thread = start_http_server(args.port, addr=args.host, registry=registry)
    print(f"metrics on http://{args.host}:{args.port}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(COMPACT_EVERY_SECONDS):
        multiprocess.compact(folder)
    server.shutdown()
    thread.join()
    return 0

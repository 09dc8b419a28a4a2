"""`pin-chessboard metrics serve --port P`: the project's metrics in Prometheus text format."""

from __future__ import annotations

import argparse
import signal
import threading

# Live gauges of processes long gone are removed this often.
PRUNE_EVERY_SECONDS = 60.0
# The dead letters waiting per consumer are read from the broker this often.
DEAD_LETTERS_EVERY_SECONDS = 10.0


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

    from pin_chessboard_pipelines.events.dead_letter_listing import WaitingDeadLettersWatch
    from pin_chessboard_pipelines.observability.exporter import build_registry
    from pin_chessboard_pipelines.recalc.queue import IMPORT_RUN_ALIVE_SECONDS
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.settings import load_settings
    from pin_chessboard_pipelines.store.gauges import read_store_gauges
    from pin_chessboard_pipelines.store.metric_samples import prune_live, read_samples
    from pin_chessboard_pipelines.talent_import.lock import LOCK as IMPORT_LOCK

    settings = load_settings()
    url = database_url(settings)
    read = partial(
        read_store_gauges,
        url,
        settings.recalc_poison_attempts,
        IMPORT_LOCK.key,
        IMPORT_RUN_ALIVE_SECONDS,
    )
    # the dead letters waiting per consumer, read from the broker beside the scrapes
    watch = WaitingDeadLettersWatch(settings.kafka_bootstrap_servers, DEAD_LETTERS_EVERY_SECONDS).start()
    registry = build_registry(partial(read_samples, url), read, watch.read)
    server, thread = start_http_server(args.port, addr=args.host, registry=registry)
    print(f"metrics on http://{args.host}:{args.port}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(PRUNE_EVERY_SECONDS):
        try:
            prune_live(url)
        except Exception as error:  # noqa: BLE001 - the next round tries again; scrapes go on
            print(f"live metric rows not pruned: {type(error).__name__}", flush=True)
    server.shutdown()
    thread.join()
    watch.stop()
    return 0

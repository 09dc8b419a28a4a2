"""`pin-chessboard metrics serve --port P`: the project's metrics in Prometheus text format."""

from __future__ import annotations

import argparse
import signal
import threading


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("metrics", help="Prometheus exposition of the project's metrics")
    commands = parser.add_subparsers(dest="metrics_command", required=True)
    serve = commands.add_parser("serve", help="serve /metrics until Ctrl-C")
    serve.add_argument("--port", type=int, required=True)
    serve.add_argument("--host", default="127.0.0.1")
    serve.set_defaults(func=_serve)


def _serve(args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server

    from pin_chessboard_pipelines.observability.exporter import build_registry
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.settings import load_settings

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

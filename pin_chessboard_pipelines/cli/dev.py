"""`pin-chessboard dev`: the local runtime on embedded defaults."""

from __future__ import annotations

import argparse


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    dev = subparsers.add_parser(
        "dev", help="embedded PostgreSQL + broker + simulator + Dagster UI/daemon (Ctrl-C stops all)"
    )
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=3000, help="Dagster UI port")
    dev.add_argument("--dataset", default="demo", help="simulator dataset preset (embedded simulator only)")
    dev.add_argument(
        "--demo", action="store_true", help="run the demo (import, recalc, events) once the UI is up"
    )
    dev.set_defaults(func=_dev)


def _dev(args: argparse.Namespace) -> int:
    from pin_chessboard_pipelines.runtime.dev import run_dev

    return run_dev(host=args.host, port=args.port, dataset=args.dataset, demo=args.demo)

"""`pin-chessboard db upgrade`."""

from __future__ import annotations

import argparse

from pin_chessboard_pipelines.runtime.services import database_url
from pin_chessboard_pipelines.settings import load_settings, redact_url
from pin_chessboard_pipelines.store.migrate import current_revision, upgrade


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    db = subparsers.add_parser("db", help="the chessboard store")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    up = db_commands.add_parser("upgrade", help="apply the migrations (idempotent)")
    up.set_defaults(func=_upgrade)


def _upgrade(args: argparse.Namespace) -> int:
    url = database_url(load_settings())
    upgrade(url)
    print(f"chessboard store at revision {current_revision(url)} ({redact_url(url)})")
    return 0

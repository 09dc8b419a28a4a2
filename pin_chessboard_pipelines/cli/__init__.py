"""`pin-chessboard`: parses arguments and calls the same code Dagster calls (README.md#commands).

One module of this package per command group, each with `add_commands(subparsers)`; this module
only assembles them and turns errors into one line on stderr with the contract's exit codes.
The command modules import Dagster and the jobs inside their handlers, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from functools import partial
from typing import TextIO

from pin_chessboard_pipelines.cli import (
    db,
    dev,
    handbook_sync,
    import_,
    inventory,
    metrics,
    outbox,
    recalc,
    talent_sim,
    talent_sync,
)
from pin_chessboard_pipelines.cli.arguments import OneLineParser
from pin_chessboard_pipelines.errors import EXIT_FAILED, ChessboardError, error_line
from pin_chessboard_pipelines.observability import samples
from pin_chessboard_pipelines.observability.tracing import configure_tracing
from pin_chessboard_pipelines.settings import load_settings

# The command groups, in the order of `--help`.
COMMAND_MODULES = (
    db,
    talent_sim,
    metrics,
    dev,
    recalc,
    outbox,
    import_,
    talent_sync,
    handbook_sync,
    inventory,
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="pin-chessboard", description="PIN chessboard pipelines")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module in COMMAND_MODULES:
        module.add_commands(subparsers)
    return parser


# The attribute Dagster sets on a record it captured into a run's event log (dagster.yaml
# `managed_python_loggers`); tests/unit/test_cli_logging.py checks it against Dagster's name.
DAGSTER_RECORD_ATTR = "dagster_meta"


class NotCapturedByARun(logging.Filter):
    """A record a Dagster run of this process captured is printed by the run's console logger
    already: the terminal's handler leaves it out, or every line of a run shows twice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not hasattr(record, DAGSTER_RECORD_ATTR)


def configure_logging(verbose: bool, stream: TextIO | None = None) -> logging.Handler:
    """The terminal's log lines: one handler on stderr, records of a run left to the run's logger."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(NotCapturedByARun())
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler])
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    try:
        settings = load_settings()
        configure_tracing(settings)  # every variable is checked before any command runs
        from pin_chessboard_pipelines.events.contracts import published

        published()  # every published contract version has its payload builders
        # what a command counts reaches the store (found when first needed) by its exit
        from pin_chessboard_pipelines.runtime.services import database_url
        from pin_chessboard_pipelines.store.metric_samples import DeferredStoreSink

        samples.install(DeferredStoreSink(partial(database_url, settings)))
        return int(args.func(args) or 0)
    except ChessboardError as error:
        print(error.line(), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # an infrastructure failure: one line, no traceback unless -v
        if args.verbose:
            raise
        print(error_line(error, limit=None), file=sys.stderr)
        return EXIT_FAILED

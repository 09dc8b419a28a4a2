"""`pin-chessboard`: parses arguments and calls the same code Dagster calls (operations.md, "Commands").

Each domain registers its own subcommands through `add_commands(subparsers)`; this module only
assembles them and turns errors into one line on stderr with the contract's exit codes.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import re
import sys
from collections.abc import Sequence

from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_REFUSED, ChessboardError
from pin_chessboard_pipelines.settings import load_settings

# Modules that define `add_commands(subparsers)`, in the order of `--help`.
COMMAND_MODULES = (
    "pin_chessboard_pipelines.store.commands",
    "pin_chessboard_pipelines.talent.simulator.cli",
    "pin_chessboard_pipelines.observability.exporter",
    "pin_chessboard_pipelines.runtime.commands",
    "pin_chessboard_pipelines.recalc.commands",
    "pin_chessboard_pipelines.events.commands",
    "pin_chessboard_pipelines.talent_import.commands",
    "pin_chessboard_pipelines.talent.sync_commands",
)


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line naming what is wrong, exit 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_REFUSED, f"{self.prog}: {message}\n")


_CREDENTIALS = re.compile(r"(://[^:/@\s]+:)[^@\s]+@")


def one_line(error: BaseException) -> str:
    """`Type: first line of the message`, with any URL password masked."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return _CREDENTIALS.sub(r"\1***@", f"{type(error).__name__}: {lines[0] if lines else ''}".strip())


def positive_seconds(raw: str) -> float:
    """argparse type of a `--… SECONDS` option."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="pin-chessboard", description="PIN chessboard pipelines")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module in COMMAND_MODULES:
        importlib.import_module(module).add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        load_settings()  # every variable is checked before any command runs
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
        print(one_line(error), file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())

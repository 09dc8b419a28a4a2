"""What every command group's parser shares: the one-line parser and the argument types."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from uuid import UUID

from pin_chessboard_pipelines.errors import EXIT_REFUSED


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line naming what is wrong, exit 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_REFUSED, f"{self.prog}: {message}\n")


def positive_seconds(raw: str) -> float:
    """argparse type of a `--… SECONDS` option."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a positive number of seconds")
    return value


def uuid_argument(raw: str) -> UUID:
    """argparse type of a `--project-id PIN_ID` option."""
    try:
        return UUID(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a UUID") from None


def add_consumer_parser(
    subparsers: argparse._SubParsersAction,
    name: str,
    help: str,  # noqa: A002 - argparse's own word
    until_idle_help: str,
    func: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """The parser of a consumer command (talent-sync, handbook-sync): `--until-idle`, `--time-budget`."""
    parser = subparsers.add_parser(name, help=help)
    parser.add_argument("--until-idle", action="store_true", help=until_idle_help)
    parser.add_argument(
        "--time-budget",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="stop after this long (default: never)",
    )
    parser.set_defaults(func=func)
    return parser


def consumer_job_config(args: argparse.Namespace) -> dict[str, object]:
    """The run config of a consumer command's job."""
    return {"until_idle": bool(args.until_idle), "time_budget_seconds": args.time_budget}

"""What every command group's parser shares: the one-line parser and the argument types."""

from __future__ import annotations

import argparse
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

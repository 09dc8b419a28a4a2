"""The console logger of every job: one line per event on stderr. Dagster's default prints every
failure's stack trace, hundreds of lines for one wrong password; the trace stays in the run's event
log (the UI). The same logger for a run from the UI, a sensor or `pin-chessboard`, so a CLI run's
job is the very job of the code location, with its snapshot (README.md#commands)."""

from __future__ import annotations

import logging
import sys
from typing import Any

import dagster as dg


class FirstLine(logging.Formatter):
    """One line per record."""

    def format(self, record: logging.LogRecord) -> str:
        lines = super().format(record).splitlines()
        return lines[0] if lines else ""


@dg.logger(
    config_schema={
        "log_level": dg.Field(str, is_required=False, default_value="INFO"),
        "name": dg.Field(str, is_required=False, default_value="dagster"),
    },
    description="One line per event on stderr (the event log keeps the whole of each).",
)
def one_line_console(init_context: Any) -> logging.Logger:
    config = init_context.logger_config
    logger = logging.Logger(config["name"], level=logging.getLevelName(config["log_level"].upper()))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FirstLine("%(asctime)s - %(name)s - %(levelname)s - %(message)s"))
    logger.addHandler(handler)
    return logger


LOGGERS = {"console": one_line_console}

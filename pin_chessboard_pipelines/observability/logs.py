"""One structured log line: `event Key=value Key=value`, the fields also in the record's `extra`."""

from __future__ import annotations

import logging
from typing import Any


def log_event(logger: logging.Logger | logging.LoggerAdapter, level: int, event: str, **fields: Any) -> None:
    """Logs `event` with its fields as `Key=value` pairs (in call order); a handler that wants them
    structured reads `record.event` and `record.fields`. Nothing is formatted below `level`."""
    if logger.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        logger.log(level, "%s %s", event, text, extra={"event": event, "fields": fields})

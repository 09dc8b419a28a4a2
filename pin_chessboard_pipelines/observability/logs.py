"""One structured log line: `event Key=value Key=value`, the fields also in the record's `extra`;
`counters` / `counter_fields`: a run's result record as a summary (metadata, CLI) and log fields."""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Collection, Mapping
from typing import Any


def log_event(logger: logging.Logger | logging.LoggerAdapter, level: int, event: str, **fields: Any) -> None:
    """Logs `event` with its fields as `Key=value` pairs (in call order); a handler that wants them
    structured reads `record.event` and `record.fields`. Nothing is formatted below `level`."""
    if logger.isEnabledFor(level):
        text = " ".join(f"{k}={v}" for k, v in fields.items())
        logger.log(level, "%s %s", event, text, extra={"event": event, "fields": fields})


def counters(
    record: Any, after: Mapping[str, Mapping[str, Any]] | None = None, leave_out: Collection[str] = ()
) -> dict[str, Any]:
    """A result dataclass as a summary: its fields in order under camelCase names, floats rounded to
    3 places, enums as their values; `after[name]`: more entries that follow field `name` (also when
    `leave_out` names that field: the entries stand in its place)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        if f.name in leave_out:
            out.update((after or {}).get(f.name, {}))
            continue
        value = getattr(record, f.name)
        if isinstance(value, float):
            value = round(value, 3)
        elif isinstance(value, enum.Enum):
            value = value.value
        head, *rest = f.name.split("_")
        out[head + "".join(word.capitalize() for word in rest)] = value
        out.update((after or {}).get(f.name, {}))
    return out


def counter_fields(summary: Mapping[str, Any], *leave_out: str) -> dict[str, Any]:
    """A summary (see `counters`) as the Key=value fields of a log line."""
    return {key[0].upper() + key[1:]: value for key, value in summary.items() if key not in leave_out}

"""JSON of event payloads with exact decimals (chessboard-store.md, "Changes of v1.1": exact numbers).

Prices and areas are `numeric` in the store and travel as JSON numbers with exactly the stored
digits: `987654321098.76543` stays `987654321098.76543`, never through a binary float. Payload
builders keep such values as `Decimal`; `dumps` writes a Decimal's own digits as a JSON number and
`loads` reads non-integral numbers back as Decimal. Compact separators, UTF-8 text (no \\u escapes).

orjson does the work (the outbox rows of a page are the import's hottest Python): a Decimal goes in
as an `orjson.Fragment` of its digits, which orjson writes as they are.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import orjson


def number(value: Decimal) -> int | Decimal:
    """The JSON form of a numeric value: an int when integral (`100.00` -> 100), else the Decimal
    with its stored digits."""
    if not value.is_finite():
        raise ValueError(f"{value} has no JSON form")
    if value == value.to_integral_value():
        return int(value)
    return value


def _text(value: Decimal) -> str:
    if not value.is_finite():
        raise ValueError(f"{value} has no JSON form")
    text = str(value)  # the stored digits; exponent form ("1E-7") is valid JSON too
    return text


def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return orjson.Fragment(_text(value))
    raise TypeError(f"no JSON form for {type(value).__name__}")


def dumps(value: Any) -> str:
    """Compact JSON text; Decimals as JSON numbers with their own digits."""
    return dumps_bytes(value).decode()


def dumps_bytes(value: Any) -> bytes:
    try:
        return orjson.dumps(value, default=_default)
    except orjson.JSONEncodeError as error:  # what json.dumps raises for the same values
        cause = error.__cause__
        raise (cause if isinstance(cause, TypeError | ValueError) else TypeError(str(error))) from None


def loads(text: str | bytes) -> Any:
    """JSON with every non-integral number as a Decimal (exact), integers as int."""
    return json.loads(text, parse_float=Decimal)


def compact(json_text: str) -> str:
    """The same JSON re-written compactly with every number's digits kept (e.g. jsonb's `::text`,
    which puts a space after `,` and `:`)."""
    return dumps(loads(json_text))

"""A page's items as the walker stages them in the store, and back
(docs/talent-initial-import.md#pages-read-once).

The text is the items' JSON with every number's own digits (events/exact_json.py), so the items a
claimant reads back equal the ones the walker read. A float can only come from a NaN or Infinity
literal of a broken source, which JSON cannot carry: such a page is not staged, its claimant reads
it by cursor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from enum import StrEnum
from typing import Any

from pin_chessboard_pipelines.events import exact_json


class ReadFrom(StrEnum):
    """Where a page's claimant took its items (talent_import_pages.items_read_from)."""

    WALK = "walk"  # the walker of the same process handed them over in memory
    STAGED = "staged"  # talent_import_staged_pages, staged by the walker of another process
    SOURCE = "source"  # read again from the source by the page's cursor


def staged_text(items: Sequence[Any]) -> str | None:
    """The JSON text of a page's items; None when they hold a value JSON cannot carry."""
    if _holds_float(items):
        return None
    try:
        return exact_json.dumps(list(items))
    except (TypeError, ValueError):
        return None


def staged_items(text: str) -> list[Any]:
    items = exact_json.loads(text)
    if not isinstance(items, list):
        raise ValueError("a staged page is a JSON array")
    return items


# values that are neither a float nor hold one: not looked into
_LEAVES = frozenset({str, int, bool, Decimal, type(None)})


def _holds_float(value: Any) -> bool:
    stack: list[Any] = [value]
    children: Iterable[Any]
    while stack:
        current = stack.pop()
        if type(current) is float:
            return True
        if isinstance(current, dict):
            children = current.values()
        elif isinstance(current, list | tuple):
            children = current
        else:
            continue
        kinds = set(map(type, children))  # one pass in C over a page's flat snapshots
        if float in kinds:
            return True
        if not kinds <= _LEAVES:
            stack.extend(child for child in children if type(child) not in _LEAVES)
    return False


__all__ = ["ReadFrom", "staged_items", "staged_text"]

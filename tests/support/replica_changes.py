"""Test oracle: whether a newer Talent snapshot changes anything that is published (the store's
upserts decide it in SQL, store/sql/replica.sql; this says in Python what they must decide).

chessboard-store.md, "Changes of v1.1" (nothing to publish, nothing published): a newer Talent
version whose mapped fields equal the stored ones updates `replica_version` / `last_synced_at`
only: no event, no `version` bump. Pure: values as the store returns them (Decimal, UUID,
datetime) or as the mapping produces them (canonical UUID strings, Decimal).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

# Columns a sync writes that are bookkeeping, not published state.
BOOKKEEPING_COLUMNS = frozenset({"id", "external_talent_id", "replica_version", "last_synced_at"})


def mapped_columns(upsert_columns: Iterable[str]) -> tuple[str, ...]:
    """The columns of an upsert whose change is published (every column but the bookkeeping)."""
    return tuple(c for c in upsert_columns if c not in BOOKKEEPING_COLUMNS)


def same_value(stored: Any, new: Any) -> bool:
    """Equal as the store compares them: numbers by value (`5.50` = `5.5`), ids whatever their
    spelling (UUID or string, any case), instants whatever their time zone."""
    if stored is None or new is None:
        return stored is None and new is None
    if isinstance(stored, bool) or isinstance(new, bool):
        return stored is new
    if _numeric(stored) and _numeric(new):
        return _decimal(stored) == _decimal(new)
    if isinstance(stored, UUID) or isinstance(new, UUID):
        return _uuid_text(stored) == _uuid_text(new)
    if isinstance(stored, datetime) and isinstance(new, datetime):
        if (stored.tzinfo is None) != (new.tzinfo is None):
            return False
        return stored == new
    if isinstance(stored, datetime) or isinstance(new, datetime):
        return _instant(stored) == _instant(new)
    return bool(stored == new)


def changed_columns(stored: Mapping[str, Any], new: Mapping[str, Any], columns: Iterable[str]) -> list[str]:
    """The mapped `columns` whose new value differs from the stored row's."""
    return [c for c in columns if c not in BOOKKEEPING_COLUMNS and not same_value(stored.get(c), new.get(c))]


def publishes_change(
    stored: Mapping[str, Any] | None, new: Mapping[str, Any], columns: Iterable[str]
) -> bool:
    """True when applying `new` over `stored` is a published change: a create, or any mapped
    column different. False = only replica_version / last_synced_at move (no event, no bump)."""
    if stored is None:
        return True
    return bool(changed_columns(stored, new, columns))


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float | Decimal)


def _decimal(value: Any) -> Decimal:
    try:
        return value if isinstance(value, Decimal) else Decimal(str(value))
    except InvalidOperation:
        return Decimal("NaN")


def _uuid_text(value: Any) -> str | None:
    try:
        return str(value if isinstance(value, UUID) else UUID(str(value)))
    except ValueError:
        return None


def _instant(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None

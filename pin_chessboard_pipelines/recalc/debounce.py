"""Debounce arithmetic of the recalc queue (docs/project-aggregates-recalc.md#queue-and-debounce).

The SQL in store/sql/recalc_queue.sql (`enqueue_recalc`) computes the same thing in one statement;
a test checks that the two agree.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum


class RecalcReason(StrEnum):
    PROPERTY_OBJECT_STATUS_CHANGED = "PropertyObjectStatusChanged"
    PROPERTY_OBJECT_PRICE_CHANGED = "PropertyObjectPriceChanged"
    PROPERTY_OBJECT_UPSERTED = "PropertyObjectUpserted"
    LAYOUT_CHANGED = "LayoutChanged"
    TALENT_SYNC = "TalentSync"
    CRUD = "Crud"


def next_due_at(
    now: datetime,
    first_requested_at: datetime | None,
    debounce: timedelta,
    cap: timedelta,
    force: bool = False,
) -> datetime:
    """When a project's recalc becomes due after one more request at `now`.

    A new row (no first_requested_at) is due after the debounce; an existing one is pushed back by
    the debounce but never past first_requested_at + cap (starvation cap). `force` = due now.
    """
    if force:
        return now
    if first_requested_at is None:
        return now + debounce
    return min(now + debounce, first_requested_at + cap)

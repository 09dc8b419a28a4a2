"""The debounce arithmetic of the recalc queue (docs/project-aggregates-recalc.md#queue-and-debounce):
the reference the tests compare `enqueue_recalc`'s SQL with."""

from __future__ import annotations

from datetime import datetime, timedelta


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

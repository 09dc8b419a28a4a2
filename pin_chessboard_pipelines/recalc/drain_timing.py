"""When the long-lived recalc drain looks at the queue, and when the sensor starts the next drain
run (docs/project-aggregates-recalc.md#drain). Pure arithmetic on Unix seconds.

Time is cut into slots of `lifetime` seconds; a drain run serves one slot: it drains due rows, sleeps
until the next DueAt (at most `poll` seconds, so a row forced due now is seen too) and ends at the
slot's end. The sensor starts the run of a slot `lead` seconds before it is needed, so the successor
is already polling when its predecessor ends: one run per slot, 3600 / lifetime runs an hour at most
under a continuous stream of requests, and a due row waits for the drain's poll, not for a run start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DrainSlot:
    index: int
    ends_at: float  # Unix seconds


def slot_for(now: float, lifetime: float, lead: float) -> DrainSlot:
    """The slot a run requested at `now` serves: the one holding now + lead, so that a run requested
    within `lead` seconds of a boundary takes over the next slot."""
    index = math.floor((now + lead) / lifetime)
    return DrainSlot(index=index, ends_at=(index + 1) * lifetime)


def poll_wait(now: float, ends_at: float, next_due_in: float | None, poll: float) -> float | None:
    """Seconds the drain sleeps before it looks at the queue again: until the next DueAt, at most
    `poll`, never past its end. None: the run's slot is over."""
    remaining = ends_at - now
    if remaining <= 0:
        return None
    wait = poll if next_due_in is None else min(poll, max(0.0, next_due_in))
    return min(wait, remaining)


def needs_drain_run(next_due_in: float | None, lead: float) -> bool:
    """The sensor starts a run when a row no live run will drain (the queue is asked from the end of
    the live runs' slots on) falls due within `lead` seconds."""
    return next_due_in is not None and next_due_in <= lead


def next_attempt(cursor_slot: int | None, cursor_attempt: int, slot: int) -> int:
    """0 for a slot's first run; a slot whose run ended early (killed, cancelled) gets 1, 2, …"""
    return cursor_attempt + 1 if cursor_slot == slot else 0


def drain_run_key(slot: int, attempt: int) -> str:
    """One run key per slot and attempt: a tick the daemon evaluates twice launches one run."""
    return f"recalc-drain:{slot}" if attempt == 0 else f"recalc-drain:{slot}.{attempt}"

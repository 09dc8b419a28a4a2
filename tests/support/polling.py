"""Waiting on observable state in tests: poll with a deadline, never sleep as synchronisation."""

from __future__ import annotations

import time


def wait_until(predicate, timeout: float = 30.0, what: str = "condition"):
    """The first truthy value of predicate(), polled every 20 ms; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.02)

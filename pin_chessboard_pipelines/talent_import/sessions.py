"""Import sessions open in this process, by correlation id.

All assets of one Dagster run (in-process executor: one process, steps one after another) share
one import run row and one advisory-lock holder; the CLI opens the session before it launches the
run, so a refusal is reported before Dagster starts.
"""

from __future__ import annotations

import threading

from pin_chessboard_pipelines.talent_import.runner import ImportSession

_sessions: dict[str, ImportSession] = {}
_lock = threading.Lock()


def register(correlation_id: str, session: ImportSession) -> None:
    with _lock:
        if correlation_id in _sessions:
            raise RuntimeError(f"an import session of {correlation_id} is open already")
        _sessions[correlation_id] = session


def get(correlation_id: str) -> ImportSession | None:
    with _lock:
        return _sessions.get(correlation_id)


def pop(correlation_id: str) -> ImportSession | None:
    with _lock:
        return _sessions.pop(correlation_id, None)

"""Concurrent apply calls on one store: a raced live number raises for the caller to retry."""

from __future__ import annotations

import threading
import time

from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
)
from pin_chessboard_pipelines.replica.apply import (
    apply_snapshots,
)
from tests.support.replica import (
    Tree,
    apply,
    one,
)


def _wait_for_lock_waiter(engine, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = one(
            engine,
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )["n"]
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("no backend waits on a lock")


def test_concurrent_pages_racing_for_one_number_wait_on_their_project_then_quarantine(engine, make_ctx):
    """Both pages change one project: the second waits on the project's recalc request, which the
    first locked before its rows (one lock order for every writer), then sees the committed number
    and quarantines its duplicate."""
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    first, second = tree.obj("1-1-1"), tree.obj("1-1-1")
    outcome: dict[str, object] = {}
    conn = engine.connect()
    trans = conn.begin()
    apply_snapshots(conn, "propertyObject", [first], ctx)

    def other_page() -> None:
        try:
            outcome["result"] = apply(engine, "propertyObject", [second], ctx)
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=other_page)
    worker.start()
    _wait_for_lock_waiter(engine)  # the other page blocks on the project's queue row
    assert worker.is_alive()
    trans.commit()
    conn.close()
    worker.join(timeout=30)
    assert "error" not in outcome, outcome
    assert outcome["result"].quarantined == [(second["id"], SYNC_DUPLICATE_NUMBER)]  # type: ignore[attr-defined]

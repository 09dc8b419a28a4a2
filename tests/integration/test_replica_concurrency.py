"""Concurrent apply calls on one store: a raced live number raises for the caller to retry."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy.exc import IntegrityError

from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
)
from pin_chessboard_pipelines.replica.apply import (
    apply_snapshots,
)
from tests.support.replica import (
    Tree,
    apply,
    context_factory,
    one,
)


@pytest.fixture
def make_ctx(engine):
    return context_factory(engine)


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


def test_concurrent_pages_racing_for_one_number_raise_for_a_retry(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    first, second = tree.obj("1-1-1"), tree.obj("1-1-1")
    outcome: dict[str, BaseException | None] = {}
    conn = engine.connect()
    trans = conn.begin()
    apply_snapshots(conn, "propertyObject", [first], ctx)

    def other_page() -> None:
        try:
            apply(engine, "propertyObject", [second], ctx)
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=other_page)
    worker.start()
    _wait_for_lock_waiter(engine)  # the other page blocks on the uncommitted live number
    assert worker.is_alive()
    trans.commit()
    conn.close()
    worker.join(timeout=30)
    assert isinstance(outcome["error"], IntegrityError)
    # the retry of the page quarantines the duplicate
    assert apply(engine, "propertyObject", [second], ctx).quarantined == [
        (second["id"], SYNC_DUPLICATE_NUMBER)
    ]

"""The store's pool on a real PostgreSQL whose server ends a connection while it idles in the pool
(what a restart does to every connection): one idle long enough is pinged and replaced before it is
handed out; one used more recently fails its first statement, and the next attempt runs on a new
connection (docs/store.md#connections)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import ping_when_idle, sqlalchemy_url
from tests.support.polling import wait_until

PID = sa.text("SELECT pg_backend_pid()")


@contextmanager
def _engine(url: str, idle_seconds: float) -> Iterator[sa.Engine]:
    engine = ping_when_idle(
        sa.create_engine(sqlalchemy_url(url), pool_size=1, max_overflow=0, pool_use_lifo=True),
        idle_seconds,
    )
    try:
        yield engine
    finally:
        engine.dispose()


def _backend_pid(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(PID).scalar_one()


def _terminate(url: str, pid: int) -> None:
    """The server ends backend `pid`; returns once it is gone."""
    admin = sa.create_engine(sqlalchemy_url(url), poolclass=sa.NullPool)
    try:
        with admin.connect() as conn:
            assert conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar_one()

        def gone() -> bool:
            with admin.connect() as conn:
                query = sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
                return conn.execute(query, {"pid": pid}).scalar_one() == 0

        wait_until(gone, timeout=10, what=f"backend {pid} to exit")
    finally:
        admin.dispose()


def test_a_connection_idle_past_the_threshold_is_pinged_and_replaced(db_url: str) -> None:
    with _engine(db_url, idle_seconds=0.0) as engine:
        first = _backend_pid(engine)
        _terminate(db_url, first)
        assert _backend_pid(engine) != first  # no error: the ping found it dead


def test_a_connection_used_just_now_goes_out_unpinged_and_its_pool_recovers(db_url: str) -> None:
    with _engine(db_url, idle_seconds=3600.0) as engine:
        first = _backend_pid(engine)
        assert _backend_pid(engine) == first  # the same connection, handed out again
        _terminate(db_url, first)
        with pytest.raises(sa.exc.DBAPIError) as lost:
            _backend_pid(engine)
        assert lost.value.connection_invalidated
        assert _backend_pid(engine) != first

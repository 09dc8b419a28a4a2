"""ONE advisory lock for every job that must run alone (import, outbox relay, talent-sync, migrations).

A session-level PostgreSQL advisory lock, keyed by the first 8 bytes of the SHA-256 of its name:
held by the session of the connection that took it until released or until that session ends, so a
dead process frees it. `describe` names the backend that holds it, for the operator's message.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.stopper import Stopper
from pin_chessboard_pipelines.store.engine import sqlalchemy_url
from pin_chessboard_pipelines.store.queries import queries

log = logging.getLogger(__name__)


def lock_key(name: str) -> int:
    """The bigint key of a lock name: the first 8 bytes of its SHA-256, signed."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


class AdvisoryLock:
    """The lock `name`; every method takes the connection whose session holds (or asks for) it.

    Session-level calls want an AUTOCOMMIT connection, so that no transaction stays open while the
    lock is held."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.key = lock_key(name)

    def try_acquire(self, conn: Connection) -> bool:
        return bool(conn.execute(queries("locks")["advisory_try_lock"], {"key": self.key}).scalar_one())

    def acquire(
        self,
        conn: Connection,
        timeout: float | None = 0,
        *,
        should_stop: Callable[[], bool] | None = None,
        poll_seconds: float = 0.05,
        max_poll_seconds: float = 1.0,
    ) -> bool:
        """Tries until it holds the lock (True), or `timeout` seconds passed (None: no limit) or
        `should_stop()` (False). Polls every `poll_seconds`, doubling up to `max_poll_seconds`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stopper = Stopper.of(should_stop)
        pause = poll_seconds
        while True:
            if self.try_acquire(conn):
                return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if (remaining is not None and remaining <= 0) or stopper.stopped():
                return False
            stopper.sleep(pause if remaining is None else min(pause, remaining))
            pause = min(pause * 2, max_poll_seconds)

    def release(self, conn: Connection) -> None:
        """Releases the lock; raises if the session is gone (and the lock with it)."""
        conn.execute(queries("locks")["advisory_unlock"], {"key": self.key})

    def lock_transaction(self, conn: Connection) -> None:
        """Waits for the lock and holds it until `conn`'s transaction ends."""
        conn.execute(queries("locks")["advisory_xact_lock"], {"key": self.key})

    def lock_transaction_shared(self, conn: Connection) -> None:
        """Waits while a transaction holds the lock exclusively; shared until `conn`'s transaction ends."""
        conn.execute(queries("locks")["advisory_xact_lock_shared"], {"key": self.key})

    def running(self, engine: Engine) -> bool:
        """Whether another session holds the lock now (taken and released at once otherwise)."""
        with engine.connect() as conn:
            if not self.try_acquire(conn):
                return True
            self.release(conn)
            conn.commit()
        return False

    def holder_pid(self, conn: Connection) -> int | None:
        return conn.execute(queries("locks")["advisory_lock_holder"], {"key": self.key}).scalar()

    def describe(self, conn: Connection) -> str:
        """`name (pid N)`, or the name alone when no session holds it (any more)."""
        pid = self.holder_pid(conn)
        return self.name if pid is None else f"{self.name} (pid {pid})"

    @contextmanager
    def held(
        self,
        conn: Connection,
        timeout: float | None = 0,
        *,
        should_stop: Callable[[], bool] | None = None,
        before_release: Callable[[], object] | None = None,
    ) -> Iterator[bool]:
        """`with lock.held(conn) as taken:` acquires (see `acquire`) and, when taken, releases on
        exit after `before_release()`; a failing release invalidates `conn` (its session is gone,
        and the lock with it), so the pool never hands out that session again."""
        taken = self.acquire(conn, timeout, should_stop=should_stop)
        try:
            yield taken
        finally:
            if taken:
                try:
                    if before_release is not None:
                        before_release()
                    self.release(conn)
                except Exception:  # noqa: BLE001 - the lock went with the session
                    conn.invalidate()


def open_session(url: str | sa.URL, application_name: str) -> Connection:
    """A connection of its own (AUTOCOMMIT, TCP keepalives) for a lock held across a long job:
    `application_name` shows in pg_stat_activity who holds it. Close it to end the session."""
    engine = sa.create_engine(
        url if isinstance(url, sa.URL) else sqlalchemy_url(url),
        poolclass=NullPool,
        connect_args={
            "application_name": application_name,
            "keepalives": 1,
            "keepalives_idle": 30,
            "keepalives_interval": 10,
            "keepalives_count": 3,
        },
    )
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


class SessionLock:
    """`lock` held on a pooled AUTOCOMMIT connection of its own for a long job, taken again on a
    new session when the store restarted (the old session, and the lock with it, is gone).

    `with SessionLock(lock, engine) as taken:`; `ensure()` after a store failure."""

    def __init__(self, lock: AdvisoryLock, engine: Engine) -> None:
        self.lock = lock
        self.engine = engine
        self._conn: Connection | None = None

    def __enter__(self) -> bool:
        return self._take()

    def __exit__(self, *exc: object) -> None:
        self._drop(release=True)

    def ensure(self) -> bool:
        """True while this process holds the lock (taken again on a new session if its session
        died); False when another session took it meanwhile. Raises while the store is away."""
        if self._conn is not None:
            try:
                self.lock.holder_pid(self._conn)  # the session is alive: it still holds the lock
                return True
            except Exception:  # noqa: BLE001 - the session died, and the lock with it
                self._drop(release=False)
                taken = self._take()
                log_event(
                    log, logging.WARNING, "advisory_lock_retaken", Lock=repr(self.lock.name), Taken=taken
                )
                return taken
        return self._take()

    def _take(self) -> bool:
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            taken = self.lock.try_acquire(conn)
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        if not taken:
            conn.close()
            return False
        self._conn = conn
        return True

    def _drop(self, *, release: bool) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if release:
                self.lock.release(conn)
            else:
                conn.invalidate()  # the pool never hands out that session again
        except Exception:  # noqa: BLE001 - the lock went with the session
            conn.invalidate()
        finally:
            conn.close()

"""The import's cluster-wide advisory lock (docs/talent-initial-import.md).

Held on a connection of its own for the whole import and released in every case (a dead process
releases it with its session). Acquired by polling until a deadline, then refused without retry:
CHESSBOARD_IMPORT_LOCK_HELD, naming the backend that holds it.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.errors import IMPORT_LOCK_HELD, Refused
from pin_chessboard_pipelines.store.lock import AdvisoryLock, open_session

LOCK = AdvisoryLock("Pin:lock:job:chessboard-talent-initial-import")
LOCK_NAME = LOCK.name
APPLICATION_NAME = "pin-chessboard-import-lock"  # pg_stat_activity shows who holds it (runbook)


class ImportLock:
    """`LOCK` held by this process on its own session: acquire, release, a context manager."""

    def __init__(self, url: str | sa.URL) -> None:
        self.url = url
        self._conn: Connection | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    def acquire(
        self,
        timeout: float,
        poll_seconds: float = 0.5,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        """Takes the lock or raises Refused(CHESSBOARD_IMPORT_LOCK_HELD) after `timeout` seconds."""
        if self._conn is not None:
            return
        conn = open_session(self.url, APPLICATION_NAME)
        try:
            if not LOCK.acquire(
                conn,
                timeout,
                should_stop=should_stop,
                poll_seconds=poll_seconds,
                max_poll_seconds=poll_seconds,
            ):
                raise Refused(
                    f"another talent initial import holds the advisory lock {LOCK.describe(conn)}; "
                    f"gave up after {timeout:g} s",
                    IMPORT_LOCK_HELD,
                )
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            LOCK.release(conn)
        except Exception:  # noqa: BLE001 - a broken session: closing it below releases the lock anyway
            conn.invalidate()
        finally:
            conn.close()

    def __enter__(self) -> ImportLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

"""The import's cluster-wide PostgreSQL advisory lock (seed 004, "Расписание И Locking").

A session-level lock on a dedicated connection, held for the whole import and released in every
case (a dead process releases it with its connection). Acquired by polling pg_try_advisory_lock
until a deadline, then refused without retry: CHESSBOARD_IMPORT_LOCK_HELD.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

import psycopg2

from pin_chessboard_pipelines.errors import IMPORT_LOCK_HELD, Refused
from pin_chessboard_pipelines.store.engine import libpq_url

LOCK_NAME = "Pin:lock:job:chessboard-talent-initial-import"
APPLICATION_NAME = "pin-chessboard-import-lock"  # pg_stat_activity shows who holds it (runbook)


def lock_key(name: str = LOCK_NAME) -> int:
    """The bigint key of a lock name: the first 8 bytes of its SHA-256, signed."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


IMPORT_LOCK_KEY = lock_key()


class AdvisoryLock:
    def __init__(self, url: str, key: int = IMPORT_LOCK_KEY) -> None:
        self.url = url
        self.key = key
        self._conn = None

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
        conn = psycopg2.connect(
            libpq_url(self.url),
            application_name=APPLICATION_NAME,
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=3,
        )
        conn.autocommit = True
        deadline = time.monotonic() + timeout
        try:
            while True:
                with conn.cursor() as cur:
                    cur.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
                    if cur.fetchone()[0]:
                        self._conn = conn
                        return
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (should_stop is not None and should_stop()):
                    holder = _holder(conn, self.key)
                    raise Refused(
                        f"another talent initial import holds the advisory lock {LOCK_NAME}"
                        f"{holder}; gave up after {timeout:g} s",
                        IMPORT_LOCK_HELD,
                    )
                time.sleep(min(poll_seconds, remaining))
        except BaseException:
            conn.close()
            raise

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not conn.closed:
                with conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        except psycopg2.Error:
            pass  # a broken connection: closing it below releases the lock anyway
        finally:
            conn.close()

    def __enter__(self) -> AdvisoryLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(conn, key: int) -> str:
    """` (pid N)` of the session holding the lock, for the operator's message; "" if unknown."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND ((classid::bigint << 32) | objid::bigint) = (%s::bigint) LIMIT 1",
            (key,),
        )
        row = cur.fetchone()
    return f" (pid {row[0]})" if row else ""

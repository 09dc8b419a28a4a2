"""Connections to the chessboard store: one engine per process, URL normalisation."""

from __future__ import annotations

import time
from functools import cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

# A connection back in the pool for longer than this is pinged before it is handed out again. One
# used more recently goes out unpinged: a server restart since then fails its first statement, and
# SQLAlchemy then drops every connection of the pool opened before (docs/store.md#connections).
PING_IDLE_SECONDS = 2.0
IDLE_SINCE = "pin_idle_since"  # ConnectionPoolEntry.info key: when the connection came back


def sqlalchemy_url(url: str) -> str:
    """`postgresql+psycopg2://…`: SQLAlchemy 2.1 reads a bare `postgresql://` as psycopg 3."""
    parts = urlsplit(url)
    if parts.scheme in ("postgresql", "postgres"):
        parts = parts._replace(scheme="postgresql+psycopg2")
    return urlunsplit(parts)


def libpq_url(url: str) -> str:
    """`postgresql://…` for psycopg2 / libpq."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(scheme="postgresql"))


def with_database(url: str, database: str) -> str:
    """The same server, another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}"))


def ping_when_idle(engine: Engine, idle_seconds: float = PING_IDLE_SECONDS) -> Engine:
    """The pool's pre-ping for connections idle `idle_seconds` or more only: a page's statements
    check out a connection several times a page, and a round trip each time cost as much as the
    version guard's read. A ping that fails hands out a new connection instead (DisconnectionError)."""

    @event.listens_for(engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info[IDLE_SINCE] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.pop(IDLE_SINCE, None)  # none: opened just now
        if since is None or time.monotonic() - since < idle_seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as error:  # noqa: BLE001 - whatever the ping met, the pool opens another
            raise sa.exc.DisconnectionError(str(error).strip()) from error

    return engine


@cache
def get_engine(url: str, pool_size: int = 8) -> Engine:
    """One engine per URL and process; the most recently used connection is handed out first
    (use_lifo), so that the others idle and only they are pinged (ping_when_idle)."""
    return ping_when_idle(
        sa.create_engine(
            sqlalchemy_url(url),
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_use_lifo=True,
            future=True,
        )
    )

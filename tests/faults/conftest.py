"""Fixtures of the fault suite (`make faults`): a PostgreSQL server of the module's own that the
tests restart and crash, a broker the tests kill and freeze, and `pin-chessboard` run as operators
run it (a subprocess with the environment of operations.md).

The suite runs only when CHESSBOARD_FAULT_SUITE=1 (`make faults`), so `make test` stays fast.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pin_chessboard_pipelines.runtime.embedded import admin_execute
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.migrate import upgrade
from tests.faults.cli import Cli
from tests.faults.services import Broker, Postgres

if os.environ.get("CHESSBOARD_FAULT_SUITE") != "1":
    collect_ignore_glob = ["test_*.py"]

TEMPLATE = "chessboard_fault_template"
_counter = itertools.count()


@pytest.fixture(scope="module")
def fault_pg() -> Iterator[Postgres]:
    """A PostgreSQL server for this module alone (the tests restart and crash it)."""
    # outside pytest's 0700 temp tree: the server runs as another system user when tests run as root
    pg = Postgres(Path(tempfile.mkdtemp(prefix="chessboard-fault-pg-"))).start()
    admin_execute(pg.url(), f'CREATE DATABASE "{TEMPLATE}"')
    upgrade(pg.url(TEMPLATE))
    get_engine(pg.url(TEMPLATE)).dispose()
    try:
        yield pg
    finally:
        pg.destroy()


@pytest.fixture
def fault_db(fault_pg: Postgres) -> Iterator[str]:
    """A freshly migrated chessboard database on the fault server; its Dagster storage beside it."""
    if not fault_pg.running():
        fault_pg.start()
    n = next(_counter)
    name = f"chessboard_fault_{os.getpid()}_{n}"
    admin_execute(fault_pg.url(), f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
    admin_execute(fault_pg.url(), f'CREATE DATABASE "dagster_{name}"')
    url = fault_pg.url(name)
    yield url
    get_engine(url).dispose()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker of this test alone (the test kills or freezes it)."""
    b = Broker(tmp_path / "broker").start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def cli(tmp_path: Path, fault_db: str, broker: Broker) -> Iterator[Cli]:
    runner = Cli(tmp_path, fault_db, broker.bootstrap)
    try:
        yield runner
    finally:
        runner.stop_all()

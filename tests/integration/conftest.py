"""Fixtures the integration tests share: a Kafka broker of the test's own, the environment of an
in-process `pin-chessboard` command, and the replica's apply context."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.replica import context_factory
from tests.support.talent_kafka import own_broker


@pytest.fixture
def broker() -> Iterator[str]:
    """A Tansu broker only this test uses (its topics hold exactly what the test publishes)."""
    with own_broker() as bootstrap:
        yield bootstrap


@pytest.fixture
def broker_in_settings(broker: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """`broker`, named by KAFKA_BOOTSTRAP_SERVERS too (what the Dagster shells and commands read)."""
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", broker)
    return broker


@pytest.fixture
def cli_env(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The test's database and a DAGSTER_HOME of its own (returned) for `main([...])`."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    # a DAGSTER_HOME with its own dagster.yaml: Dagster's default local storage in the folder
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", db_url)
    return home


@pytest.fixture
def make_ctx(engine):
    """context_factory(engine): `make_ctx(run_id=..., stage=...)` is an apply context on the test's store."""
    return context_factory(engine)

"""Secured Kafka (operations.md "Production Kafka (v1.3)"): the KAFKA_* client properties reach
the project's commands, against a real broker behind TLS (Tansu + stunnel, tests/support/kafka_tls.py).

- `outbox relay` (admin client, producer) and the reference consumer work over SSL with the CA,
  and so do the simulator's publisher and talent-sync (group consumer, offsets, its relay);
- a CA that did not sign the broker's certificate, or a SASL login the broker refuses, stops the
  command with one line, exit 2, at once rather than after the time budget;
- the SASL password never appears in the command's output nor in the Dagster instance's storage.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.events.outbox import OutboxEvent, pending_summary, write_outbox
from pin_chessboard_pipelines.events.payloads import DEVELOPER_UPSERTED, topic_of
from pin_chessboard_pipelines.events.reference_consumer import read_events
from tests.support.kafka_tls import TlsFiles, make_tls_files, tls_broker

PASSWORD = "Pw-Zq7xK-never-printed-0C0FFEE"  # distinctive: found if it leaks anywhere
BUDGET = "120"  # the relay's time budget: a refusal must end the command long before it


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_bootstrap(tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with tls_broker(tmp_path_factory.mktemp("tls-broker"), tls) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def sasl_bootstrap(tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Tansu with --authentication behind TLS: every SCRAM login is checked (and, with no user
    the in-memory broker can be given, refused)."""
    with tls_broker(tmp_path_factory.mktemp("sasl-broker"), tls, authentication=True) as bootstrap:
        yield bootstrap


def _write(engine, n: int) -> set[str]:
    events = [OutboxEvent(DEVELOPER_UPSERTED, str(uuid.uuid4()), {"version": 1}) for _ in range(n)]
    with engine.begin() as conn:
        write_outbox(conn, events)
    return {str(e.message_id) for e in events}


def _cli(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )
    return result, time.monotonic() - started


def _ssl(bootstrap: str, ca: Path) -> dict[str, str]:
    return {
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_SECURITY_PROTOCOL": "SSL",
        "KAFKA_SSL_CA_LOCATION": str(ca),
    }


def _refused(result: subprocess.CompletedProcess) -> str:
    """The command's last stderr line, once it has refused (exit 2)."""
    assert result.returncode == 2, result.stdout + result.stderr
    return result.stderr.strip().splitlines()[-1]


def test_relay_and_reference_consumer_work_over_tls(cli_env, engine, tls, tls_bootstrap, monkeypatch):
    sent = _write(engine, 3)
    env = _ssl(tls_bootstrap, tls.ca)

    result, _ = _cli(env, "outbox", "relay", "--until-empty", "--time-budget", BUDGET)

    assert result.returncode == 0, result.stdout + result.stderr
    assert pending_summary(engine)["backlog"] == 0
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    events = read_events(
        tls_bootstrap,
        [topic_of(DEVELOPER_UPSERTED)],
        until=lambda got: sent <= {e.message_id for e in got},
        timeout=60,
    )
    assert sent <= {e.message_id for e in events}


def test_talent_sync_reads_what_the_simulator_published_over_tls(cli_env, engine, tls, tls_bootstrap):
    env = _ssl(tls_bootstrap, tls.ca)

    published, _ = _cli(env, "talent-sim", "publish", "--dataset", "tiny", "--no-handbook")
    synced, _ = _cli(env, "talent-sync", "--until-idle", "--time-budget", BUDGET)

    assert published.returncode == 0, published.stderr
    assert synced.returncode == 0, synced.stdout + synced.stderr
    summary = json.loads(synced.stdout.strip().splitlines()[-1])
    sent = json.loads(published.stdout.strip().splitlines()[-1])
    assert summary["status"] == "Completed"
    assert summary["messages"] == sum(sent["published"].values()) > 0
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.property_objects")).scalar_one() > 0


def test_a_ca_that_did_not_sign_the_broker_is_one_line_and_exit_2(cli_env, engine, tls, tls_bootstrap):
    _write(engine, 1)

    result, seconds = _cli(_ssl(tls_bootstrap, tls.other_ca), "outbox", "relay", "--time-budget", BUDGET)

    line = _refused(result)
    assert line.startswith("CHESSBOARD_KAFKA_REFUSED: "), result.stderr
    assert "certificate verify failed" in line
    assert seconds < 90, f"{seconds:.0f} s: the refusal waited for the time budget"
    assert pending_summary(engine)["backlog"] == 1

    published, seconds = _cli(_ssl(tls_bootstrap, tls.other_ca), "talent-sim", "publish", "--dataset", "tiny")
    assert _refused(published).startswith("CHESSBOARD_KAFKA_REFUSED: ")
    assert published.stderr.strip().count("\n") == 0, published.stderr
    assert seconds < 60


def test_a_refused_sasl_login_is_one_line_exit_2_and_the_password_is_never_shown(
    cli_env, engine, tls, sasl_bootstrap
):
    _write(engine, 1)
    env = {
        **_ssl(sasl_bootstrap, tls.ca),
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISMS": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": "chessboard",
        "KAFKA_SASL_PASSWORD": PASSWORD,
        "KAFKA_DEBUG": "security,broker,conf",  # librdkafka's own lines too, shown with -v
    }

    result, seconds = _cli(env, "-v", "outbox", "relay", "--time-budget", BUDGET)

    line = _refused(result)
    assert line.startswith("CHESSBOARD_KAFKA_REFUSED: "), result.stderr
    assert "SASL" in line
    assert seconds < 90, f"{seconds:.0f} s: the refusal waited for the time budget"
    assert PASSWORD not in result.stdout + result.stderr
    stored = [
        path for path in cli_env.rglob("*") if path.is_file() and PASSWORD.encode() in path.read_bytes()
    ]
    assert stored == [], "the password is in the Dagster instance's storage"
    assert pending_summary(engine)["backlog"] == 1


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"KAFKA_NO_SUCH_PROPERTY": "1"}, "KAFKA_NO_SUCH_PROPERTY"),
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL"),
        ({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_KEY_PEM": PASSWORD}, "KAFKA_SSL_KEY_PEM"),
    ],
)
def test_a_property_librdkafka_refuses_stops_any_command_with_one_line(cli_env, env, names):
    result, _ = _cli({**env, "KAFKA_SASL_PASSWORD": PASSWORD}, "outbox", "events")

    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"{names} is invalid: librdkafka says ")
    assert PASSWORD not in result.stdout + result.stderr

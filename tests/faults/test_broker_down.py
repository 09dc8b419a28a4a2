"""The broker down during an import (the import completes, the outbox waits) and during a relay
(nothing is lost when it comes back)."""

from __future__ import annotations

import time

import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants

SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=40)


def _pending(url: str) -> int:
    with get_engine(url).connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM chessboard.outbox_messages WHERE published_at IS NULL")
        ).scalar_one()


def test_broker_down_during_an_import_and_into_a_relay(cli, talent_sim, broker):
    """Killed before the import: the import completes and the outbox waits; a relay with a short
    budget fails with one line; a relay that starts while the broker is still down publishes
    everything once the broker comes up 5 s later."""
    sim = talent_sim(SPEC)
    url = cli.database_url
    broker.kill()
    imported = cli.run("import", "--page-size", "50", TALENT_API_URL=sim.url, timeout=300)
    assert imported.returncode == 0, imported.describe()
    assert imported.result["status"] == "Completed"
    assert imported.tracebacks == 0, imported.describe()
    assert _pending(url) > 0  # the outbox waits for the broker

    drained = cli.run("recalc", "drain", "--until-empty")
    assert drained.returncode == 0, drained.describe()
    down = cli.run("outbox", "relay", "--until-empty", "--time-budget", "3")
    assert down.returncode == 1, down.describe()
    assert down.tracebacks == 0 and down.last_error_line, down.describe()

    running = cli.start("outbox", "relay", "--until-empty", "--time-budget", "120")
    time.sleep(5)  # the broker stays down for a while into the relay
    broker.start()
    relay = running.wait(timeout=240)
    assert relay.returncode == 0, relay.describe()
    report = invariants.check_all(url, SPEC, bootstrap=broker.bootstrap)
    report.facts["pending before the broker came back"] = "all"
    assert report.ok, str(report)


def test_broker_frozen_during_a_relay(cli, talent_sim, broker):
    """SIGSTOP: the broker's port stays open and every request hangs, for 8 s of the relay."""
    spec = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=200)
    sim = talent_sim(spec)
    url = cli.database_url
    broker.kill()  # the import and the drain leave their rows pending
    assert cli.run("import", "--page-size", "500", TALENT_API_URL=sim.url, timeout=300).returncode == 0
    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    total = _pending(url)
    assert total > 0
    broker.start()
    broker.freeze()
    running = cli.start("outbox", "relay", "--until-empty", "--time-budget", "180")
    time.sleep(8)  # the outage itself
    broker.thaw()
    relay = running.wait(timeout=240)
    assert relay.returncode == 0, relay.describe()
    assert _pending(url) == 0
    report = invariants.check_all(url, spec, bootstrap=broker.bootstrap)
    report.facts["pending when frozen"] = total
    assert report.ok, str(report)

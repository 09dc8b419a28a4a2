"""PostgreSQL restarted (immediate shutdown, 1 s down) under talent-sync and under the outbox relay.

Both ride it out within the page-retry budget (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS, the import's)
and complete: the store's session, and the job's advisory lock with it, are taken again; nothing
is lost or applied twice.
"""

from __future__ import annotations

import re
import time

import sqlalchemy as sa

from pin_chessboard_pipelines.events.relay import RELAY_LOCK
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset
from tests.faults import invariants
from tests.faults.test_postgres_restart import RETRY_ENV, _scalar
from tests.support.polling import wait_until

STORE_RETRY = re.compile(
    r"(talent_sync_retry|outbox_relay_retry) Reason=(connection-lost|database-restarting)"
)
LOCK_RETAKEN = "advisory_lock_retaken Lock='Pin:lock:job:chessboard-talent-sync' Taken=True"


def test_postgres_restarted_under_talent_sync(cli, fault_pg, broker):
    spec = DatasetSpec(developers=5, projects_per_developer=40, objects_per_project=40, layouts_per_project=2)
    publish_dataset(spec, broker.bootstrap)
    url = cli.database_url
    running = cli.start("talent-sync", "--until-idle", **RETRY_ENV)
    applied = "SELECT count(*) FROM chessboard.property_objects"
    wait_until(lambda: _scalar(url, applied) > 0, 180, "talent-sync applying property objects")
    still_running = running.proc.poll() is None
    fault_pg.restart(down_seconds=1.0, how="crash")
    done = running.wait(timeout=300)
    get_engine(url).dispose()
    assert done.returncode == 0, done.describe()
    assert done.result["status"] == "Completed" and done.result["stopped"] == "done", done.describe()
    if still_running:  # the restart hit the running consumer: it waited for the store, or the
        # restart fell between two batches and the next one took the lock again on a new session
        assert STORE_RETRY.search(done.stderr) or LOCK_RETAKEN in done.stderr, done.describe()
    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    assert cli.run("outbox", "relay", "--until-empty", "--time-budget", "120").returncode == 0
    report = invariants.Report()
    report.add("replica equals source", invariants.replica_matches_source(url, spec))
    report.add("no duplicate external id", invariants.no_duplicate_external_ids(url))
    report.add("audit 0 after drain", invariants.audit_clean(url))
    report.add("every outbox row on Kafka", invariants.outbox_on_kafka(url, broker.bootstrap))
    report.facts = invariants.facts(url)
    report.facts["restarted while running"] = still_running
    print(report)
    assert report.ok, str(report)


def test_postgres_restarted_under_the_relay(cli, talent_sim, fault_pg, broker):
    """The relay holds its session and lock while the broker is down; PostgreSQL restarts under it;
    then the broker comes back: every row is published once the relay has a new session."""
    spec = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=40)
    sim = talent_sim(spec)
    url = cli.database_url
    broker.kill()  # the import and the drain leave their rows pending
    assert cli.run("import", "--page-size", "50", TALENT_API_URL=sim.url, timeout=300).returncode == 0
    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    pending = "SELECT count(*) FROM chessboard.outbox_messages WHERE published_at IS NULL"
    assert _scalar(url, pending) > 0

    running = cli.start("outbox", "relay", "--until-empty", "--time-budget", "240", **RETRY_ENV)
    wait_until(lambda: _relay_lock_holder(url) is not None, 180, "the relay holding its lock")
    time.sleep(2)  # the relay is under way: deliveries failing and retried
    assert running.proc.poll() is None, running.wait().describe()
    fault_pg.restart(down_seconds=1.0, how="crash")
    time.sleep(2)  # the store is back before the broker
    broker.start()
    relay = running.wait(timeout=300)
    get_engine(url).dispose()
    assert relay.returncode == 0, relay.describe()
    assert relay.result["complete"] is True, relay.describe()
    assert STORE_RETRY.search(relay.stderr), relay.describe()
    assert _scalar(url, pending) == 0
    report = invariants.check_all(url, spec, bootstrap=broker.bootstrap)
    assert report.ok, str(report)


def _relay_lock_holder(url: str) -> int | None:
    try:
        with get_engine(url).connect() as conn:
            return RELAY_LOCK.holder_pid(conn)
    except sa.exc.OperationalError:
        get_engine(url).dispose()
        return None

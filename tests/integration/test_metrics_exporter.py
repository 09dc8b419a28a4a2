"""`metrics serve`'s registry on a real store: the live gauges come from PostgreSQL (a killed
import cannot leave chessboard_import_running at 1, poison rows are not due backlog), and the
apply path's counters count a page once even when its transaction was rolled back and retried."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
import sqlalchemy as sa
from prometheus_client import generate_latest

from pin_chessboard_pipelines.observability import samples
from pin_chessboard_pipelines.observability.exporter import build_registry
from pin_chessboard_pipelines.replica.apply import apply_snapshots
from pin_chessboard_pipelines.store.gauges import read_store_gauges
from pin_chessboard_pipelines.store.metric_samples import read_samples, store_sink
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.lock import LOCK, ImportLock
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource
from tests.support.import_runs import insert_import_run


@pytest.fixture
def counting(db_url: str):
    """This process counts from zero into the test's store."""
    samples.discard()
    samples.install(store_sink(db_url))


def _scrape(db_url: str) -> dict[str, float]:
    samples.flush()
    registry = build_registry(partial(read_samples, db_url), partial(read_store_gauges, db_url, 5, LOCK.key))
    out = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_recalc_gauges_leave_poison_rows_out_of_the_due_backlog(db_url, engine, counting):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO chessboard.project_recalc_requests "
                "(project_id, tenant_id, due_at, first_requested_at, last_reason, attempt_count) "
                "SELECT gen_random_uuid(), :t, now() - interval '1 minute', now(), 'Crud', "
                "       CASE WHEN i <= 150 THEN 5 ELSE 0 END "
                "FROM generate_series(1, 153) AS i "
                "UNION ALL SELECT :p, :t, now() + interval '1 hour', now(), 'Crud', 0"
            ),
            {"p": uuid.uuid4(), "t": uuid.uuid4()},
        )
    values = _scrape(db_url)
    assert values["chessboard_store_up"] == 1
    assert values["chessboard_recalc_queue_depth"] == 154
    assert values["chessboard_recalc_due_backlog"] == 3  # 150 poison rows do not keep the backlog alert up
    assert values["chessboard_recalc_poison_rows"] == 150
    assert values["chessboard_outbox_backlog"] == 0


def test_import_running_follows_the_heartbeat_not_a_leftover_row(db_url, engine, counting):
    run_id = uuid.uuid4()
    started = datetime.now(UTC) - timedelta(hours=3)
    insert_import_run(engine, run_id, started_at=started, correlation_id=str(run_id), page_size=10)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO chessboard.talent_import_pages "
                "(run_id, stage, page_no, status, items_planned, items_applied, items_skipped, items_failed) "
                "VALUES (:id, 'Projects', 0, 'Done', 30, 20, 6, 4), (:id, 'Projects', 1, 'Pending', 30, 0, 0, 0)"
            ),
            {"id": run_id},
        )
    # a killed import: the row says Running, nobody holds the lock
    values = _scrape(db_url)
    assert values["chessboard_import_running"] == 0
    assert values["chessboard_import_runs_running"] == 1
    assert values["chessboard_import_run_duration_seconds"] > 3 * 3600 - 60
    assert values["chessboard_import_throughput_items_per_sec"] == pytest.approx(30 / 60)

    def run_sql(statement: str) -> None:
        with engine.begin() as conn:
            conn.execute(sa.text(statement), {"id": run_id})

    # a Dagster step's import (UI, backfill, full bootstrap): no lock, its page workers renew the
    # heartbeat in whatever process they run
    run_sql(
        "UPDATE chessboard.talent_import_runs SET heartbeat_at = now() WHERE id = :id; "
        "UPDATE chessboard.talent_import_pages SET status = 'InProgress', claimed_by = 'pod-a:7', "
        "heartbeat_at = now() WHERE run_id = :id AND page_no = 1"
    )
    values = _scrape(db_url)
    assert (values["chessboard_import_running"], values["chessboard_import_processes"]) == (1, 1)
    # a process that finished a page a moment ago, between two pages, still works on the import
    run_sql(
        "UPDATE chessboard.talent_import_pages SET claimed_by = 'pod-b:8', finished_at = now() "
        "WHERE run_id = :id AND page_no = 0"
    )
    assert _scrape(db_url)["chessboard_import_processes"] == 2
    run_sql(
        "UPDATE chessboard.talent_import_pages SET finished_at = now() - interval '16 seconds' "
        "WHERE run_id = :id AND page_no = 0"
    )
    assert _scrape(db_url)["chessboard_import_processes"] == 1
    # its processes die: 90 s without a heartbeat and the run is no longer running
    run_sql(
        "UPDATE chessboard.talent_import_runs SET heartbeat_at = now() - interval '91 seconds' "
        "WHERE id = :id; UPDATE chessboard.talent_import_pages "
        "SET heartbeat_at = now() - interval '91 seconds' WHERE run_id = :id"
    )
    values = _scrape(db_url)
    assert (values["chessboard_import_running"], values["chessboard_import_processes"]) == (0, 0)
    # the CLI holds the import lock: its run is alive while the heartbeat is fresh and the lock held
    run_sql("UPDATE chessboard.talent_import_runs SET heartbeat_at = now(), lock_held = true WHERE id = :id")
    assert _scrape(db_url)["chessboard_import_running"] == 0  # nobody holds the lock: killed
    lock = ImportLock(db_url)
    lock.acquire(timeout=0)
    try:
        assert _scrape(db_url)["chessboard_import_running"] == 1
    finally:
        lock.release()
    assert _scrape(db_url)["chessboard_import_running"] == 0


def test_store_down_is_reported_not_raised():
    values = _scrape("postgresql://nobody@127.0.0.1:1/none")
    assert values["chessboard_store_up"] == 0
    assert "chessboard_import_running" not in values


def test_a_rolled_back_page_counts_its_quarantine_once(db_url, engine, talent_sim, counting):
    """The first attempt of every property-object page fails after the apply (inside the page
    transaction); the retry commits. Failed items and unknown enums are counted once."""
    sim = talent_sim(DatasetSpec(objects_per_project=8, poison_every=3, unknown_enum_every=2))
    failed_once: set[str] = set()

    def flaky_apply(conn, entity, items, ctx):
        result = apply_snapshots(conn, entity, items, ctx)
        key = f"{entity}:{items[0]['id'] if items else ''}"
        if entity == "propertyObject" and key not in failed_once:
            failed_once.add(key)
            raise ConnectionError("the store went away before the commit")
        return result

    result = ImportSession(
        db_url,
        build_request(page_size=4, workers=1),
        ApiPullSource(sim.url),
        options=ImportOptions(retry_seconds=0.01, idle_poll_seconds=0.02, lock_timeout_seconds=1),
        apply=flaky_apply,
    ).run_here()
    assert result.status == "Completed" and failed_once
    with engine.connect() as conn:
        quarantined = conn.execute(
            sa.text("SELECT count(*) FROM chessboard.talent_import_failed_items")
        ).scalar()
    values = _scrape(db_url)
    assert quarantined > 0
    assert values["chessboard_import_failed_items_total"] == quarantined == result.totals.failed
    unknown = sum(v for k, v in values.items() if k.startswith("chessboard_sync_unknown_enum_total{"))
    assert unknown > 0
    done = sum(
        v
        for k, v in values.items()
        if k.startswith("chessboard_import_pages_total{") and 'status="Done"' in k
    )
    with engine.connect() as conn:
        assert (
            done
            == conn.execute(
                sa.text("SELECT count(*) FROM chessboard.talent_import_pages WHERE status = 'Done'")
            ).scalar()
        )

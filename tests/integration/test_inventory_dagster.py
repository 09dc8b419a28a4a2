"""project_inventory_daily end to end: the asset materialized through Dagster on a real store, the
table, the materialization metadata and the totals plotted over days, agreement with the stored
aggregates once the recalc queue is drained, and the refusal while the audit reports drift."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

import dagster as dg
import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.analytics import definitions as inventory_definitions
from pin_chessboard_pipelines.defs.analytics.definitions import (
    ASSET_KEY,
    DRIFT_CHECK,
    IO_MANAGER_KEY,
    project_inventory_daily,
)
from pin_chessboard_pipelines.defs.analytics.io_manager import DailyTableIOManager
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.errors import AGGREGATES_DRIFT
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.replica.apply import ApplyContext, apply_snapshots
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.recalc_data import StoreBuilder, standard_project

DAY1, DAY2 = "2026-11-28", "2026-11-29"


def _resources(db_url: str) -> dict:
    chessboard = ChessboardResource(database_url=db_url)
    return {"chessboard": chessboard, IO_MANAGER_KEY: DailyTableIOManager(chessboard=chessboard)}


_NOW: dict[str, datetime] = {}


@pytest.fixture(autouse=True)
def _clock(monkeypatch):
    """The asset's clock: each materialization runs at 23:50 UTC of its day unless a test says."""
    monkeypatch.setattr(inventory_definitions, "utc_now", lambda: _NOW["now"])


def _materialize(
    db_url: str, instance: dg.DagsterInstance, day: str, now: datetime | None = None
) -> dg.ExecuteInProcessResult:
    _NOW["now"] = now or datetime.combine(date.fromisoformat(day), time(23, 50), tzinfo=UTC)
    return dg.materialize(
        [project_inventory_daily],
        partition_key=day,
        resources=_resources(db_url),
        instance=instance,
        raise_on_error=False,
    )


def _table(engine, day: str | None = None) -> dict[tuple[str, date], dict]:
    query = "SELECT * FROM chessboard_analytics.project_inventory_daily"
    with engine.connect() as conn:
        rows = conn.execute(sa.text(query)).mappings().all()
    return {
        (str(r["project_id"]), r["day"]): dict(r) for r in rows if day is None or r["day"].isoformat() == day
    }


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    (materialization,) = result.asset_materializations_for_node(ASSET_KEY.to_python_identifier())
    return {k: v.value for k, v in materialization.metadata.items()}


def _store(engine) -> dict:
    """Three live projects, one archived, one deleted; the recalc queue drained."""
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        live = [standard_project(b, name=f"Project {i}") for i in range(3)]
        archived = standard_project(b, status="Archived")
        deleted = standard_project(b)
        conn.execute(
            sa.text("UPDATE chessboard.projects SET deleted_at = now() WHERE id = :id"), {"id": deleted.id}
        )
        for p in (*live, archived, deleted):
            b.request(p)
    drain(engine)
    return {"live": live, "archived": archived, "deleted": deleted}


def _sell_everything(engine) -> None:
    """Every free object sold, the aggregates recalculated (no drift)."""
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE chessboard.property_objects SET status = 'Sold' WHERE status = 'Free'"))
        conn.execute(
            sa.text(
                "INSERT INTO chessboard.project_recalc_requests (project_id, tenant_id, due_at, "
                "first_requested_at, last_reason) SELECT id, tenant_id, now(), now(), 'Crud' "
                "FROM chessboard.projects"
            )
        )
    drain(engine)


def _agreement(engine, day: str) -> list[dict]:
    """Rows whose free count, total count or free price bounds differ from the stored aggregates."""
    with engine.connect() as conn:
        return [
            dict(r)
            for r in conn.execute(
                sa.text(
                    """
                    SELECT i.project_id
                    FROM chessboard_analytics.project_inventory_daily i
                    JOIN chessboard.projects p ON p.id = i.project_id
                    WHERE i.day = CAST(:day AS date)
                      AND (i.free_count, i.total_count, i.price_min, i.price_max)
                          IS DISTINCT FROM (p.property_objects_free_count::numeric,
                                            p.property_objects_total_count::numeric, p.price_min, p.price_max)
                    """
                ),
                {"day": day},
            ).mappings()
        ]


def _live_project_ids(engine) -> set[str]:
    with engine.connect() as conn:
        return {
            str(r[0])
            for r in conn.execute(
                sa.text(
                    "SELECT id FROM chessboard.projects WHERE deleted_at IS NULL AND status <> 'Archived'"
                )
            )
        }


def test_two_days_table_metadata_and_plotted_totals(db_url, engine):
    store = _store(engine)
    live = [str(p.id) for p in store["live"]]
    with dg.DagsterInstance.ephemeral() as instance:
        first = _materialize(db_url, instance, DAY1)
        assert first.success
        assert _agreement(engine, DAY1) == []
        day1 = _metadata(first)

        # between the days: one free object sold, one price raised, in every live project
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE chessboard.property_objects SET status = 'Sold' "
                    "WHERE status = 'Free' AND price = 4500000.50 AND project_id = ANY(CAST(:ids AS uuid[]))"
                ),
                {"ids": live},
            )
            conn.execute(
                sa.text(
                    "UPDATE chessboard.property_objects SET price = 7500000.25 "
                    "WHERE status = 'Free' AND price = 7000000 AND project_id = ANY(CAST(:ids AS uuid[]))"
                ),
                {"ids": live},
            )
            b = StoreBuilder(conn)
            for p in store["live"]:
                b.request(p)
        drain(engine)
        second = _materialize(db_url, instance, DAY2)
        assert second.success
        day2 = _metadata(second)
        checks = {(c.check_name, c.passed) for c in first.get_asset_check_evaluations()}
        records = instance.fetch_materializations(ASSET_KEY, limit=10).records

    # the table: one row per live project and day; archived and deleted projects left out
    rows1, rows2 = _table(engine, DAY1), _table(engine, DAY2)
    assert {pid for pid, _ in rows1} == {pid for pid, _ in rows2} == set(live)
    before, after = rows1[(live[0], date(2026, 11, 28))], rows2[(live[0], date(2026, 11, 29))]
    # standard_project: free 5000000, 4500000.50, 7000000 and one free without a price
    assert (before["free_count"], before["total_count"], before["sold_count"]) == (4, 6, 1)
    assert (before["reserved_count"], before["booked_count"], before["hidden_count"]) == (1, 0, 1)
    assert (before["price_min"], before["price_median"], before["price_max"]) == (
        Decimal("4500000.50"),
        Decimal("5000000"),
        Decimal("7000000"),
    )
    assert before["free_value"] == Decimal("16500000.50")
    assert before["layouts_by_rooms"] == {"1": 2}  # the deleted layout is left out
    assert (after["free_count"], after["sold_count"]) == (3, 2)
    assert (after["price_min"], after["price_median"], after["price_max"]) == (
        Decimal("5000000"),
        Decimal("6250000.125"),
        Decimal("7500000.25"),
    )
    assert after["free_value"] == Decimal("12500000.25")
    assert _agreement(engine, DAY2) == []

    # the metadata of each materialization
    assert checks == {(DRIFT_CHECK, True)}
    assert day1["dagster/row_count"] == 3 and day2["dagster/row_count"] == 3
    schema = day1["dagster/column_schema"]
    assert [c.name for c in schema.columns][:3] == ["project_id", "day", "tenant_id"]
    assert all(c.description for c in schema.columns)
    assert day1["top_projects"].splitlines()[0].startswith("| project | free |")
    assert "Project" in day1["top_projects"].splitlines()[2]
    assert (day1["free_objects"], day2["free_objects"]) == (12, 9)
    assert day1["free_value"] == pytest.approx(3 * 16500000.50)
    assert day2["free_value_exact"] == "37500000.75"
    assert (day1["median_free_price"], day2["median_free_price"]) == (5000000.0, 6250000.125)
    # the Plots tab draws the int and float entries: the inventory series only, the run's cost apart
    plotted = {
        k
        for k, v in records[0].asset_materialization.metadata.items()
        if isinstance(v, dg.IntMetadataValue | dg.FloatMetadataValue)
    }
    assert plotted == {
        "dagster/row_count",
        "projects",
        "free_objects",
        "total_objects",
        "free_value",
        "median_free_price",
    }
    assert set(day1["run_figures"]) == {"read_seconds", "compute_seconds", "read_megabytes"}

    # the plotted totals over days, as the asset's history holds them
    by_partition = {
        r.asset_materialization.partition: {k: v.value for k, v in r.asset_materialization.metadata.items()}
        for r in records
    }
    assert sorted(by_partition) == [DAY1, DAY2]
    assert [by_partition[d]["free_objects"] for d in (DAY1, DAY2)] == [12, 9]
    assert [by_partition[d]["median_free_price"] for d in (DAY1, DAY2)] == [5000000.0, 6250000.125]
    for d, rows in ((DAY1, rows1), (DAY2, rows2)):
        assert by_partition[d]["free_objects"] == sum(r["free_count"] for r in rows.values())
        assert by_partition[d]["free_value_exact"] == str(sum(r["free_value"] for r in rows.values()))


def test_materializing_a_day_again_replaces_that_day_only(db_url, engine):
    _store(engine)
    with dg.DagsterInstance.ephemeral() as instance:
        assert _materialize(db_url, instance, DAY1).success
        assert _materialize(db_url, instance, DAY2).success
        day2 = _table(engine, DAY2)
        _sell_everything(engine)
        assert _materialize(db_url, instance, DAY1).success
    assert _table(engine, DAY2) == day2
    assert {r["free_count"] for r in _table(engine, DAY1).values()} == {0}
    assert {r["free_value"] for r in _table(engine, DAY1).values()} == {0}
    assert {r["price_min"] for r in _table(engine, DAY1).values()} == {None}


def test_a_backfill_of_a_past_day_keeps_what_was_recorded_on_it_or_is_refused(db_url, engine):
    """Partition-pure: a past day is not computed from today's replica. Materialized again later
    (a backfill), a day recorded on its own day keeps those rows and says as of when they are; a
    past day never recorded is refused with one line and writes nothing."""
    _store(engine)
    day0, day1, today = "2026-11-27", DAY1, DAY2
    with dg.DagsterInstance.ephemeral() as instance:
        assert _materialize(db_url, instance, day1).success  # on its day: the replica then
        recorded = _table(engine, day1)
        _sell_everything(engine)  # the next day
        later = datetime.combine(date.fromisoformat(today), time(12, 0), tzinfo=UTC)
        backfill = _materialize(db_url, instance, day1, now=later)
        assert backfill.success
        assert _table(engine, day1) == recorded  # what was true that day, not today's sold-out replica
        metadata = _metadata(backfill)
        assert metadata["as_of_source"] == "history"
        assert metadata["as_of"] == min(r["computed_at"] for r in recorded.values()).timestamp()
        assert metadata["free_objects"] == sum(r["free_count"] for r in recorded.values()) > 0
        refused = _materialize(db_url, instance, day0, now=later)
        assert not refused.success
        failure = next(e for e in refused.all_events if e.event_type_value == "STEP_FAILURE")
        line = failure.event_specific_data.user_failure_data.description
        assert (
            line.startswith(f"project_inventory_daily {day0}: a past day is not computed")
            and "\n" not in line
        )
        assert _table(engine, day0) == {}
        fresh = _materialize(db_url, instance, today, now=later)  # today: from the replica, as of now
        assert fresh.success and _metadata(fresh)["as_of_source"] == "replica"
        assert _metadata(fresh)["as_of"] == later.timestamp()


def test_a_finished_day_is_not_rewritten_from_the_replica_in_the_hour_after_it(db_url, engine):
    """Day 1 recorded at 23:50; after midnight everything is sold. Materialized again at 00:30 of
    day 2 (a retried or late run), day 1 keeps the rows recorded on it, not the state after midnight;
    a day with no rows yet is still recorded by a late tick, once."""
    _store(engine)
    with dg.DagsterInstance.ephemeral() as instance:
        assert _materialize(db_url, instance, DAY1).success  # 23:50 of day 1
        recorded = _table(engine, DAY1)
        assert {r["free_count"] for r in recorded.values()} != {0}
        _sell_everything(engine)  # after midnight
        after_midnight = datetime.combine(date.fromisoformat(DAY2), time(0, 30), tzinfo=UTC)
        again = _materialize(db_url, instance, DAY1, now=after_midnight)
        assert again.success
        assert _table(engine, DAY1) == recorded
        assert _metadata(again)["as_of_source"] == "history"

        day0 = "2026-11-27"  # no rows: a late tick 20 min after its end records it once
        late = datetime.combine(date.fromisoformat(DAY1), time(0, 20), tzinfo=UTC)
        first = _materialize(db_url, instance, day0, now=late)
        assert first.success and _metadata(first)["as_of_source"] == "replica"
        kept = _table(engine, day0)
        second = _materialize(db_url, instance, day0, now=late + timedelta(minutes=10))
        assert second.success and _metadata(second)["as_of_source"] == "history"
        assert _table(engine, day0) == kept


def test_refuses_while_the_audit_reports_drift(db_url, engine):
    store = _store(engine)
    victim = store["live"][0]
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE chessboard.projects SET property_objects_free_count = 99 WHERE id = :id"),
            {"id": victim.id},
        )
    with dg.DagsterInstance.ephemeral() as instance:
        refused = _materialize(db_url, instance, DAY1)
        assert not refused.success
        (check,) = refused.get_asset_check_evaluations()
        assert (check.check_name, check.passed) == (DRIFT_CHECK, False)
        assert check.description.startswith(f"{AGGREGATES_DRIFT}: 1 stored aggregate(s) of 1 project(s)")
        assert check.metadata["projects_with_drift"].value == 1
        assert refused.asset_materializations_for_node(ASSET_KEY.to_python_identifier()) == []
        assert _table(engine) == {}

        # a pending recalc row makes the same divergence pending, not drift: the asset runs
        with engine.begin() as conn:
            StoreBuilder(conn).request(victim, due_in_seconds=600)
        pending = _materialize(db_url, instance, DAY1)
        assert pending.success
        assert len(_table(engine, DAY1)) == 3


def _apply_dataset(engine, spec: DatasetSpec, page: int = 2000) -> None:
    with engine.connect() as conn:
        handbook = load_handbook(conn)
    ctx = ApplyContext(
        correlation_id=f"inventory-test-{uuid.uuid4()}", handbook=handbook, debounce_seconds=0, cap_seconds=0
    )
    for entity in ENTITIES:
        items = list(dataset.iter_items(spec, entity.collection))
        for start in range(0, len(items), page):
            with engine.begin() as conn:
                apply_snapshots(conn, entity.name, items[start : start + page], ctx)


def _simulated_agreement(db_url, engine, spec: DatasetSpec) -> int:
    _apply_dataset(engine, spec)
    with engine.begin() as conn:  # some projects archived: no row for them
        conn.execute(sa.text("UPDATE chessboard.projects SET status = 'Archived' WHERE name LIKE '%7'"))
    drain(engine, batch_size=500)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.project_recalc_requests")).scalar() == 0
    with dg.DagsterInstance.ephemeral() as instance:
        result = _materialize(db_url, instance, DAY1)
    assert result.success
    rows = _table(engine, DAY1)
    assert {pid for pid, _ in rows} == _live_project_ids(engine)
    assert _agreement(engine, DAY1) == []
    return len(rows)


def test_agrees_with_the_stored_aggregates_on_the_demo_dataset(db_url, engine):
    spec = DatasetSpec.preset("demo").with_overrides(["deleted_every=9"])
    assert _simulated_agreement(db_url, engine, spec) > 0


@pytest.mark.slow
@pytest.mark.timeout(600)  # projects applied and drained one transaction each: a minute on 2 shared cores
def test_agrees_with_the_stored_aggregates_on_2k_simulated_projects(db_url, engine):
    # 2k projects: past the drain's batches (500) and the apply's pages (2000);
    # benchmarks/inventory_bench.py times 10k projects x 100 objects
    spec = DatasetSpec(
        developers=20,
        projects_per_developer=100,
        buildings_per_project=1,
        layout_groups_per_project=1,
        layouts_per_project=2,
        objects_per_project=5,
        deleted_every=13,
    )
    assert _simulated_agreement(db_url, engine, spec) > 1600

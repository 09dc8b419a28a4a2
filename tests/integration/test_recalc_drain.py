"""The drain (docs/project-aggregates-recalc.md#drain) against a real PostgreSQL, case by case."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.events.payloads import (
    BUILDING_UPSERTED,
    LAYOUT_GROUP_UPSERTED,
    LAYOUT_UPSERTED,
    PROJECT_UPSERTED,
    topic_of,
)
from pin_chessboard_pipelines.recalc.audit import audit
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from pin_chessboard_pipelines.stopper import StopReason
from pin_chessboard_pipelines.store.tables import buildings, layout_groups, layouts, projects
from tests.support.polling import wait_until
from tests.support.recalc_data import (
    StoreBuilder,
    outbox,
    queue,
    rows_of,
    standard_project,
)

# every event written meets its schema (tests/support/contracts.py)
pytestmark = pytest.mark.usefixtures("outbox_contract")

PROJECT_FIELDS = [
    "id",
    "tenantId",
    "developerId",
    "status",
    "name",
    "type",
    "class",
    "constructionStatus",
    "countryId",
    "countrySnapshot",
    "regionId",
    "regionSnapshot",
    "cityId",
    "citySnapshot",
    "stars",
    "hotelierId",
    "price",
    "currencyId",
    "currencySnapshot",
    "propertyObjectsTotalCount",
    "propertyObjectsFreeCount",
    "paybackYears",
    "coverImageFileId",
    "version",
]


def _topics(conn) -> list[str]:
    return [m["topic"] for m in outbox(conn)]


def test_empty_batch_is_a_no_op_success(engine):
    result = drain(engine)
    assert (result.recalculated, result.failed, result.batches, result.stopped) == (0, 0, 0, StopReason.DONE)
    with engine.connect() as conn:
        assert outbox(conn) == []


def test_not_yet_due_rows_stay_queued(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project, due_in_seconds=60)
    assert drain(engine).recalculated == 0
    with engine.connect() as conn:
        assert project.id in queue(conn)
        assert rows_of(conn, projects, [project.id])[project.id]["property_objects_total_count"] == 0


def test_recalc_writes_every_aggregate_and_republishes_changed_rows(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project)
    result = drain(engine, correlation_id="corr-1")
    assert result.recalculated == 1
    with engine.connect() as conn:
        p = rows_of(conn, projects, [project.id])[project.id]
        # free: 5000000, 4500000.50, 7000000, NULL price (deleted Free and Hidden excluded)
        assert (p["price_min"], p["price_max"]) == (Decimal("4500000.50"), Decimal("7000000"))
        assert p["property_objects_free_count"] == 4
        assert p["property_objects_total_count"] == 6  # all but Hidden and deleted
        assert p["version"] == 2
        b1, b2 = project.buildings
        bs = rows_of(conn, buildings, project.buildings)
        assert (bs[b1]["property_objects_total_count"], bs[b1]["property_objects_free_count"]) == (3, 2)
        assert (bs[b2]["property_objects_total_count"], bs[b2]["property_objects_free_count"]) == (3, 2)
        l1, l2, l3 = project.layouts
        ls = rows_of(conn, layouts, project.layouts)
        assert [ls[i]["property_objects_count"] for i in (l1, l2, l3)] == [3, 2, 0]
        g1, g2 = project.layout_groups
        gs = rows_of(conn, layout_groups, project.layout_groups)
        assert (gs[g1]["layouts_count"], gs[g1]["area_min"], gs[g1]["area_max"]) == (
            2,
            Decimal("35.5"),
            Decimal("60"),
        )
        assert (gs[g2]["layouts_count"], gs[g2]["area_min"], gs[g2]["area_max"]) == (0, None, None)
        messages = outbox(conn)
        assert queue(conn) == {}
        assert audit(conn) == []
    # l3 stays 0 and g2 stays 0/NULL: unchanged rows are not republished
    assert sorted(m["topic"] for m in messages) == sorted(
        [
            topic_of(PROJECT_UPSERTED),
            topic_of(LAYOUT_UPSERTED),
            topic_of(LAYOUT_UPSERTED),
            topic_of(LAYOUT_GROUP_UPSERTED),
        ]
    )
    project_event = next(m for m in messages if m["topic"] == topic_of(PROJECT_UPSERTED))
    assert sorted(project_event["payload"]) == sorted(PROJECT_FIELDS)
    payload = project_event["payload"]
    assert payload["price"] == {"min": 4500000.5, "max": 7000000}
    assert (payload["propertyObjectsTotalCount"], payload["propertyObjectsFreeCount"]) == (6, 4)
    assert payload["version"] == 2
    assert payload["countrySnapshot"] == {"id": 643, "name": "Россия", "isoCode": "RUS"}
    assert payload["regionSnapshot"] == {"id": 77, "name": "Москва"}
    assert payload["currencySnapshot"]["isoCode"] == "RUB"
    assert project_event["message_key"] == str(project.id)
    assert project_event["headers"]["correlationId"] == "corr-1"
    assert project_event["headers"]["aggregateType"] == "Project"
    assert result.republished == {"project": 1, "layout": 2, "layout_group": 1}


def test_project_without_free_objects_has_null_price_and_is_published(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = b.project(price_min=Decimal("1"), price_max=Decimal("2"), property_objects_free_count=1)
        (b1,) = b.buildings(project)
        b.objects(
            project,
            [
                (b1, None, "Sold", "100", False),
                (b1, None, "Reserved", "200", False),
                (b1, None, "Hidden", "300", False),
                (b1, None, "Booked", None, False),
            ],
        )
        b.request(project)
    drain(engine)
    with engine.connect() as conn:
        p = rows_of(conn, projects, [project.id])[project.id]
        assert (p["price_min"], p["price_max"], p["property_objects_free_count"]) == (None, None, 0)
        assert p["property_objects_total_count"] == 3
        (event,) = [m for m in outbox(conn) if m["topic"] == topic_of(PROJECT_UPSERTED)]
    assert event["payload"]["price"] is None
    assert event["payload"]["propertyObjectsFreeCount"] == 0


def test_project_without_objects_and_layouts_gets_zero_and_null(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = b.project(
            price_min=Decimal("10"),
            price_max=Decimal("20"),
            property_objects_total_count=5,
            property_objects_free_count=3,
        )
        (building,) = b.buildings(project, property_objects_total_count=5, property_objects_free_count=3)
        (group,) = b.layout_groups(project, layouts_count=2, area_min=Decimal("1"), area_max=Decimal("2"))
        b.request(project)
    drain(engine)
    with engine.connect() as conn:
        p = rows_of(conn, projects, [project.id])[project.id]
        bl = rows_of(conn, buildings, [building])[building]
        g = rows_of(conn, layout_groups, [group])[group]
    assert (
        p["price_min"],
        p["price_max"],
        p["property_objects_total_count"],
        p["property_objects_free_count"],
    ) == (None, None, 0, 0)
    assert (bl["property_objects_total_count"], bl["property_objects_free_count"]) == (0, 0)
    assert (g["layouts_count"], g["area_min"], g["area_max"]) == (0, None, None)


def test_coalescing_burst_gives_one_row_one_recalc(engine):
    with engine.begin() as conn:
        project = standard_project(StoreBuilder(conn))
    burst = 25
    for _ in range(burst):
        with engine.begin() as conn:
            enqueue_recalc(
                conn,
                [(project.id, project.tenant_id)],
                RecalcReason.PROPERTY_OBJECT_PRICE_CHANGED,
                debounce_seconds=0,
                cap_seconds=300,
            )
    with engine.connect() as conn:
        (row,) = queue(conn).values()
    assert row["requested_count"] == burst
    assert row["last_reason"] == "PropertyObjectPriceChanged"
    result = drain(engine)
    assert (result.recalculated, result.coalesced_events) == (1, burst)
    with engine.connect() as conn:
        assert len([m for m in outbox(conn) if m["topic"] == topic_of(PROJECT_UPSERTED)]) == 1
        assert queue(conn) == {}


def test_starvation_cap_forces_a_run_during_continuous_edits(engine):
    """Edits every 50 ms with a 30 s debounce never leave a quiet window; the cap (1 s) forces the
    recalc while the edits go on, and not before the cap has passed since the first request."""
    cap = 1.0
    with engine.begin() as conn:
        project = standard_project(StoreBuilder(conn))
    stop = threading.Event()

    def edit_forever():
        while not stop.is_set():
            with engine.begin() as conn:
                enqueue_recalc(
                    conn,
                    [(project.id, project.tenant_id)],
                    RecalcReason.PROPERTY_OBJECT_STATUS_CHANGED,
                    debounce_seconds=30,
                    cap_seconds=cap,
                )
            stop.wait(0.05)

    editor = threading.Thread(target=edit_forever)
    editor.start()
    try:
        result = wait_until(lambda: (r := drain(engine)).recalculated and r, 60, "the capped recalc")
        still_editing = editor.is_alive()
    finally:
        stop.set()
        editor.join()
    assert still_editing and result.recalculated == 1
    assert result.coalesced_events > 1  # the edits went on while the row waited for its cap
    (lag,) = result.lags  # first request -> commit
    assert lag >= cap - 0.01


def test_duplicate_run_keeps_values_and_bumps_version_only_on_diff(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project)
    drain(engine)
    with engine.connect() as conn:
        before = {
            t.name: rows_of(conn, t, ids)
            for t, ids in (
                (projects, [project.id]),
                (buildings, project.buildings),
                (layouts, project.layouts),
                (layout_groups, project.layout_groups),
            )
        }
        events_before = len(outbox(conn))
    with engine.begin() as conn:
        StoreBuilder(conn).request(project)
    second = drain(engine)
    assert second.recalculated == 1 and sum(second.republished.values()) == 0
    with engine.connect() as conn:
        after = {
            t.name: rows_of(conn, t, ids)
            for t, ids in (
                (projects, [project.id]),
                (buildings, project.buildings),
                (layouts, project.layouts),
                (layout_groups, project.layout_groups),
            )
        }
        assert len(outbox(conn)) == events_before
    assert after == before  # identical values, versions and updated_at

    # one object changes status: only the rows it feeds get a new version and an event
    b1 = project.buildings[0]
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE chessboard.property_objects SET status = 'Sold' "
                "WHERE building_id = :b AND price = 5000000"
            ),
            {"b": b1},
        )
        StoreBuilder(conn).request(project)
    third = drain(engine)
    assert third.republished == {"project": 1}
    with engine.connect() as conn:
        p = rows_of(conn, projects, [project.id])[project.id]
        assert p["version"] == before["projects"][project.id]["version"] + 1
        assert p["property_objects_free_count"] == 3
        ls = rows_of(conn, layouts, project.layouts)
        assert {i: r["version"] for i, r in ls.items()} == {
            i: r["version"] for i, r in before["layouts"].items()
        }


def test_building_counters_change_without_a_building_event(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = b.project()
        b1, b2 = b.buildings(project, 2)
        b.objects(project, [(b1, None, "Free", "10", False), (b2, None, "Sold", "20", False)])
        b.request(project)
    drain(engine)
    with engine.connect() as conn:
        version_before = rows_of(conn, buildings, [b1])[b1]["version"]
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE chessboard.property_objects SET building_id = :b2 WHERE building_id = :b1"),
            {"b1": b1, "b2": b2},
        )
        StoreBuilder(conn).request(project)
    result = drain(engine)
    assert result.buildings_changed == 2
    with engine.connect() as conn:
        bs = rows_of(conn, buildings, [b1, b2])
        assert (bs[b1]["property_objects_total_count"], bs[b1]["property_objects_free_count"]) == (0, 0)
        assert (bs[b2]["property_objects_total_count"], bs[b2]["property_objects_free_count"]) == (2, 1)
        assert bs[b1]["version"] == version_before  # no published change, no new version
        assert topic_of(BUILDING_UPSERTED) not in _topics(conn)
        assert audit(conn) == []


def _fail_project_updates(conn, project_id) -> None:
    """A trigger that makes every aggregate write of one project fail (a real database error)."""
    conn.execute(
        sa.text(
            "CREATE FUNCTION chessboard.test_fail() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'recalc test failure for %', NEW.id; END $$"
        )
    )
    conn.execute(
        sa.text(
            f"CREATE TRIGGER test_fail BEFORE UPDATE ON chessboard.projects FOR EACH ROW "
            f"WHEN (NEW.id = '{project_id}'::uuid) EXECUTE FUNCTION chessboard.test_fail()"
        )
    )


def test_partial_failure_rolls_back_only_that_project(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        good1, bad, good2 = standard_project(b), standard_project(b), standard_project(b)
        for p in (good1, bad, good2):
            b.request(p)
        _fail_project_updates(conn, bad.id)
        due_before = queue(conn)[bad.id]["due_at"]
    result = drain(engine)
    assert (result.recalculated, result.failed, result.failed_ids) == (2, 1, [bad.id])
    with engine.connect() as conn:
        rows = queue(conn)
        assert set(rows) == {bad.id}
        assert rows[bad.id]["attempt_count"] == 1
        assert rows[bad.id]["due_at"] == due_before
        assert "recalc test failure" in rows[bad.id]["last_error"]
        assert len(rows[bad.id]["last_error"]) <= 1024
        # the failed project's layouts were rolled back with it
        assert all(r["property_objects_count"] == 0 for r in rows_of(conn, layouts, bad.layouts).values())
        assert all(r["property_objects_count"] for r in rows_of(conn, layouts, good1.layouts[:2]).values())
        keys = {m["message_key"] for m in outbox(conn)}
        assert str(good1.id) in keys and str(good2.id) in keys and str(bad.id) not in keys


def test_poison_row_is_skipped_until_reset(engine):
    from pin_chessboard_pipelines.recalc.queue import due_summary, poison_rows, reset_poison

    with engine.begin() as conn:
        b = StoreBuilder(conn)
        bad = standard_project(b)
        b.request(bad)
        _fail_project_updates(conn, bad.id)
    results = [drain(engine, poison_attempts=3) for _ in range(3)]
    assert [r.failed for r in results] == [1, 1, 1]
    assert [len(r.poisoned) for r in results] == [0, 0, 1]
    assert drain(engine, poison_attempts=3).failed == 0  # skipped, not retried
    with engine.begin() as conn:
        assert [r["project_id"] for r in poison_rows(conn, 3)] == [bad.id]
        assert due_summary(conn, 3).poison == 1 and due_summary(conn, 3).due == 0
        conn.execute(sa.text("DROP TRIGGER test_fail ON chessboard.projects"))
        reset_poison(conn, bad.id)
    assert drain(engine, poison_attempts=3).recalculated == 1
    with engine.connect() as conn:
        assert queue(conn) == {}


def test_archived_and_deleted_projects_are_dropped_without_events(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        archived = standard_project(b, status="Archived", property_objects_total_count=99)
        deleted = standard_project(b, deleted_at=datetime.now(UTC), property_objects_total_count=99)
        b.request(archived)
        b.request(deleted)
        missing = standard_project(b)
        b.request(missing)
        # a queue row whose project does not exist (any more)
        conn.execute(
            sa.text(
                "UPDATE chessboard.project_recalc_requests SET project_id = gen_random_uuid() "
                "WHERE project_id = :p"
            ),
            {"p": missing.id},
        )
    result = drain(engine)
    assert (result.skipped_archived, result.recalculated, result.failed) == (3, 0, 0)
    with engine.connect() as conn:
        assert queue(conn) == {}
        assert outbox(conn) == []
        ps = rows_of(conn, projects, [archived.id, deleted.id])
        assert {p["property_objects_total_count"] for p in ps.values()} == {99}
        assert {p["version"] for p in ps.values()} == {1}
        assert all(
            r["property_objects_count"] == 0 for r in rows_of(conn, layouts, archived.layouts).values()
        )


def test_cancellation_between_projects_leaves_the_rest_queued(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        all_projects = [standard_project(b) for _ in range(4)]
        for p in all_projects:
            b.request(p)
    calls = {"n": 0}

    def stop_after_two() -> bool:
        calls["n"] += 1
        return calls["n"] > 3  # loop check + two project checks pass, then stop

    result = drain(engine, should_stop=stop_after_two)
    assert (result.recalculated, result.stopped) == (2, StopReason.CANCELLED)
    with engine.connect() as conn:
        remaining = queue(conn)
        assert len(remaining) == 2
        for p in all_projects:
            total = rows_of(conn, projects, [p.id])[p.id]["property_objects_total_count"]
            # each project is either fully recalculated (and dequeued) or untouched (and queued)
            assert (total == 6) == (p.id not in remaining)
    assert drain(engine).recalculated == 2


def test_time_budget_stops_between_projects(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        for _ in range(3):
            b.request(standard_project(b))
    result = drain(engine, time_budget_seconds=0)
    assert (result.recalculated, result.stopped) == (0, StopReason.TIME_BUDGET)
    assert drain(engine, batch_size=1).recalculated == 3


def test_backlog_drains_in_one_call_across_batches(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        for _ in range(7):
            b.request(standard_project(b))
    result = drain(engine, batch_size=2)
    assert (result.recalculated, result.batches) == (7, 4)
    with engine.connect() as conn:
        assert queue(conn) == {}
        assert audit(conn) == []


def test_drain_updates_the_seed_metrics(engine):
    url = engine.url.render_as_string(hide_password=False)
    from tests.support.metrics import sample_value

    def snapshot() -> dict[str, float]:
        return {
            "success": sample_value(url, "chessboard_recalc_runs_total", result="success"),
            "skipped": sample_value(url, "chessboard_recalc_runs_total", result="skipped"),
            "coalesced": sample_value(url, "chessboard_recalc_coalesced_events_total"),
            "project": sample_value(url, "chessboard_recalc_republished_total", entity="project"),
            "layout": sample_value(url, "chessboard_recalc_republished_total", entity="layout"),
            "durations": sample_value(url, "chessboard_recalc_process_duration_seconds_count"),
            "lags": sample_value(url, "chessboard_recalc_event_lag_seconds_count"),
        }

    before = snapshot()
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b), requested_count=4)
        b.request(standard_project(b, status="Archived"), requested_count=2)
    drain(engine)
    after = snapshot()
    assert {k: after[k] - before[k] for k in before} == {
        "success": 1,
        "skipped": 1,
        "coalesced": 6,
        "project": 1,
        "layout": 2,
        "durations": 1,
        "lags": 1,
    }

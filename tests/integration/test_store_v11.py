"""The store rules of version 1.1 (docs/store.md, docs/events.md): moves, one request per project
per import run, pending is not drift, exact numbers, nothing to publish -> nothing published, one
lock order for the import and the drain."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.events.messages import message_value
from pin_chessboard_pipelines.recalc.audit import audit, drift
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import release_import_requests
from pin_chessboard_pipelines.replica.apply import apply_tombstones
from pin_chessboard_pipelines.stopper import StopReason
from tests.support.import_runs import insert_import_run
from tests.support.polling import wait_until
from tests.support.replica import RUN_ID, Tree, apply, one, outbox, pid, rows


def _second_project(tree: Tree, same_developer: bool = True) -> Tree:
    other = Tree()
    if same_developer:
        other.developer = tree.developer
    other.project = {**other.project, "developerId": other.developer["id"], "name": "ЖК Южный"}
    other.building = {**other.building, "projectId": other.project["id"]}
    other.group = {**other.group, "projectId": other.project["id"]}
    other.layout = {**other.layout, "projectId": other.project["id"], "layoutGroupId": other.group["id"]}
    return other


def _drain_all(engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE chessboard.project_recalc_requests SET due_at = now(), import_run_id = NULL")
        )
    result = drain(engine)
    assert result.failed == 0 and result.stopped is StopReason.DONE


@pytest.mark.parametrize("same_developer", [True, False], ids=["same-developer", "other-developer"])
@pytest.mark.parametrize("entity", ["propertyObject", "building", "layout", "layoutGroup"])
def test_a_move_to_another_project_recalculates_both(engine, make_ctx, entity, same_developer):
    ctx = make_ctx(run_id=None)  # the streaming sync: requests are due after the debounce
    tree = Tree()
    tree.apply_parents(engine, ctx)
    other = _second_project(tree, same_developer)
    other.apply_parents(engine, ctx, with_developer=not same_developer)
    objects = [tree.obj(f"1-1-{i}", price=f"{1000 + i}.00") for i in range(3)]
    assert apply(engine, "propertyObject", objects, ctx).applied == 3
    _drain_all(engine)
    assert audit_projects(engine) == {}
    before = one(
        engine,
        "SELECT property_objects_total_count AS n FROM chessboard.projects WHERE id = :p",
        p=pid("project", tree.project),
    )
    assert before["n"] == 3

    if entity == "propertyObject":  # an object to a building (and layout) of the other project
        moved = {
            **objects[0],
            "version": 2,
            "buildingId": other.building["id"],
            "layoutId": other.layout["id"],
        }
        item = moved
    elif entity == "building":
        item = {**tree.building, "version": tree.building["version"] + 1, "projectId": other.project["id"]}
    elif entity == "layout":
        item = {
            **tree.layout,
            "version": 2,
            "projectId": other.project["id"],
            "layoutGroupId": other.group["id"],
        }
    else:
        item = {**tree.group, "version": 2, "projectId": other.project["id"]}
    result = apply(engine, entity, [item], ctx)
    assert result.applied == 1, result
    requested = {
        r["project_id"] for r in rows(engine, "SELECT project_id FROM chessboard.project_recalc_requests")
    }
    assert requested == {pid("project", tree.project), pid("project", other.project)}
    if entity == "building":  # its objects follow it: new project and tenant, published, version 2
        carried = rows(
            engine,
            "SELECT id::text, project_id, tenant_id, version FROM chessboard.property_objects ORDER BY number",
        )
        assert {(r["project_id"], r["tenant_id"], r["version"]) for r in carried} == {
            (pid("project", other.project), pid("developer", other.developer), 2)
        }
        events = outbox(engine, "property-object-upserted")[-3:]
        assert sorted(e["message_key"] for e in events) == sorted(r["id"] for r in carried)
        assert {(e["payload"]["projectId"], e["payload"]["version"]) for e in events} == {
            (str(pid("project", other.project)), 2)
        }
    _drain_all(engine)
    # both projects carry the aggregates of their own rows, and every building, layout and layout
    # group the counters of the rows that point at it, wherever those rows' projects are
    assert audit_projects(engine) == {}
    with engine.connect() as conn:
        counters = conn.execute(
            sa.text(
                "SELECT (SELECT property_objects_total_count FROM chessboard.buildings WHERE id = :b) AS building,"
                " (SELECT property_objects_count FROM chessboard.layouts WHERE id = :l) AS layout,"
                " (SELECT layouts_count FROM chessboard.layout_groups WHERE id = :g) AS grp"
            ),
            {
                "b": pid("building", tree.building),
                "l": pid("layout", tree.layout),
                "g": pid("layoutGroup", tree.group),
            },
        ).one()
    if entity == "building":
        assert tuple(counters) == (3, 3, 1)  # the old project's layout still counts the carried objects
    if entity == "layoutGroup":
        assert tuple(counters)[2] == 1  # the moved group counts its layout left in the old project


def _lock_waiters(engine) -> int:
    return one(
        engine,
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )["n"]


def audit_projects(engine) -> dict:
    with engine.connect() as conn:
        return {d.project_id: d.line() for d in audit(conn)}


def test_one_request_per_project_per_import_run_held_until_the_run_finishes(engine, make_ctx):
    ctx = make_ctx()  # an import run's pages
    tree = Tree()
    tree.apply_parents(engine, ctx)
    for page in range(4):  # four pages of one project
        apply(engine, "propertyObject", [tree.obj(f"1-{page}-{i}") for i in range(5)], ctx)
    row = one(engine, "SELECT requested_count, import_run_id FROM chessboard.project_recalc_requests")
    assert (row["requested_count"], row["import_run_id"]) == (1, RUN_ID)
    with engine.begin() as conn:  # even when due, a held request waits for the run
        conn.execute(
            sa.text("UPDATE chessboard.project_recalc_requests SET due_at = now() - interval '1 hour'")
        )
    insert_import_run(engine, RUN_ID)
    assert drain(engine).recalculated == 0
    with engine.begin() as conn:
        assert release_import_requests(conn, RUN_ID, debounce_seconds=0, cap_seconds=300) == 1
    row = one(engine, "SELECT requested_count, import_run_id FROM chessboard.project_recalc_requests")
    assert (row["requested_count"], row["import_run_id"]) == (1, None)
    assert drain(engine).recalculated == 1


def test_a_project_with_a_pending_request_is_not_drift(engine, make_ctx):
    ctx = make_ctx(run_id=None)
    tree = Tree()
    tree.apply_parents(engine, ctx)
    apply(engine, "propertyObject", [tree.obj("1-1-1")], ctx)
    with engine.connect() as conn:
        found = audit(conn)
    assert found and all(d.pending for d in found)  # the debounce window: pending, not drift
    assert drift(found) == []
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    with engine.connect() as conn:
        assert drift(audit(conn)) != []  # no row: that is drift


def test_prices_travel_with_exactly_their_stored_digits(engine, make_ctx):
    ctx = make_ctx(run_id=None)
    tree = Tree()
    tree.apply_parents(engine, ctx)
    apply(engine, "propertyObject", [tree.obj("1-1-1", price="987654321098.76543")], ctx)
    stored = one(engine, "SELECT price FROM chessboard.property_objects")["price"]
    assert stored == Decimal("987654321098.76543")
    (row,) = rows(
        engine,
        "SELECT payload::text AS payload FROM chessboard.outbox_messages "
        "WHERE topic = 'pin.chessboard.property-object-upserted.v1'",
    )
    assert '"price": 987654321098.76543' in row["payload"]
    value = message_value(row["payload"]).decode()
    assert '"price":987654321098.76543' in value
    _drain_all(engine)
    (project,) = outbox(engine, "project-upserted")[-1:]
    text = one(
        engine,
        "SELECT payload::text AS t FROM chessboard.outbox_messages WHERE topic LIKE '%project-upserted%' "
        "ORDER BY id DESC LIMIT 1",
    )["t"]
    assert '"min": 987654321098.76543' in text and project["payload"]["price"] is not None


def test_a_newer_version_with_equal_mapped_fields_publishes_nothing(engine, make_ctx):
    ctx = make_ctx(run_id=None)
    tree = Tree()
    tree.apply_parents(engine, ctx)
    item = tree.obj("1-1-1")
    apply(engine, "propertyObject", [item], ctx)
    _drain_all(engine)  # the project's aggregates are up to date
    events_before = len(outbox(engine))
    result = apply(engine, "propertyObject", [{**item, "version": 2, "price": "5000000.5"}], ctx)
    assert (result.applied, result.events) == (1, 0)
    row = one(engine, "SELECT version, replica_version FROM chessboard.property_objects")
    assert (row["version"], row["replica_version"]) == (1, 2)
    assert len(outbox(engine)) == events_before
    _drain_all(engine)  # a recalc of the unchanged project republishes nothing either
    assert len(outbox(engine)) == events_before
    # a changed mapped field is published
    changed = apply(engine, "propertyObject", [{**item, "version": 3, "status": "Sold"}], ctx)
    assert changed.events >= 1
    assert one(engine, "SELECT version FROM chessboard.property_objects")["version"] == 2


def test_an_import_page_waits_for_a_drain_holding_its_project_instead_of_deadlocking(engine, make_ctx):
    """The drain holds the project's queue row and then writes the project's rows; an import page
    takes the queue row before the rows it changes, so it waits instead of forming a cycle."""
    ctx = make_ctx(run_id=None)
    tree = Tree()
    tree.apply_parents(engine, ctx)
    apply(engine, "propertyObject", [tree.obj("1-1-1")], ctx)
    project = pid("project", tree.project)
    drain_conn = engine.connect()
    drain_tx = drain_conn.begin()
    # the drain's first step: the project's queue row, locked
    drain_conn.execute(
        sa.text("SELECT 1 FROM chessboard.project_recalc_requests WHERE project_id = :p FOR UPDATE"),
        {"p": project},
    )
    outcome: dict[str, object] = {}

    def page() -> None:
        try:
            layout = {**tree.layout, "version": 5, "name": "Студия 25 м²"}
            outcome["result"] = apply(engine, "layout", [layout], ctx)
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=page)
    worker.start()
    wait_until(lambda: _lock_waiters(engine), 20, "the page waiting on a lock")
    # the drain's second step: the project's rows (layouts included) - no cycle with the page
    drain_conn.execute(
        sa.text("UPDATE chessboard.layouts SET updated_at = now() WHERE project_id = :p"), {"p": project}
    )
    drain_tx.commit()
    drain_conn.close()
    worker.join(timeout=30)
    assert "error" not in outcome, outcome
    assert outcome["result"].applied == 1  # type: ignore[attr-defined]


def test_tombstone_requests_before_it_deletes(engine, make_ctx):
    ctx = make_ctx(run_id=None)
    tree = Tree()
    tree.apply_parents(engine, ctx)
    item = tree.obj("1-1-1")
    apply(engine, "propertyObject", [item], ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
        assert apply_tombstones(conn, "propertyObject", [item["id"]], ctx).applied == 1
    assert len(rows(engine, "SELECT * FROM chessboard.project_recalc_requests")) == 1

"""The replica rules applied to a real store: parents, live numbers, status conflicts, soft deletes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import sqlalchemy as sa

from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
    SYNC_PARENT_MISMATCH,
    SYNC_PARENT_NOT_FOUND,
    SYNC_STATUS_CONFLICT,
    SYNC_VALIDATION_FAILED,
)
from pin_chessboard_pipelines.replica.apply import (
    apply_tombstones,
)
from tests.support.replica import (
    RUN_ID,
    Tree,
    apply,
    one,
    outbox,
    pid,
    rows,
    tid,
)


def test_missing_parent_is_quarantined_and_the_rest_applied(engine, make_ctx):
    ctx = make_ctx(stage="Buildings")
    tree = Tree()
    apply(engine, "developer", [tree.developer], ctx)
    apply(engine, "project", [tree.project], ctx)
    orphan = {**tree.building, "id": tid(), "projectId": tid()}
    result = apply(engine, "building", [orphan, tree.building], ctx)
    assert (result.applied, result.failed) == (1, 1)
    assert result.quarantined == [(orphan["id"], SYNC_PARENT_NOT_FOUND)]
    failed = one(engine, "SELECT * FROM chessboard.talent_import_failed_items")
    assert (failed["run_id"], failed["stage"], failed["external_id"], failed["error_code"]) == (
        RUN_ID,
        "Buildings",
        orphan["id"],
        SYNC_PARENT_NOT_FOUND,
    )
    assert failed["payload"] == orphan
    assert orphan["projectId"] in failed["error_message"]
    assert one(engine, "SELECT count(*) AS n FROM chessboard.buildings")["n"] == 1

    # a project whose developer is missing, a property object whose building is missing
    lost = {**tree.project, "id": tid(), "developerId": tid()}
    assert apply(engine, "project", [lost], ctx).quarantined == [(lost["id"], SYNC_PARENT_NOT_FOUND)]
    lonely = tree.obj("9-9-9", buildingId=tid())
    assert apply(engine, "propertyObject", [lonely], ctx).quarantined == [
        (lonely["id"], SYNC_PARENT_NOT_FOUND)
    ]


def test_layout_links_must_stay_in_one_project(engine, make_ctx):
    ctx = make_ctx()
    tree, other = Tree(), Tree()
    other.developer = tree.developer
    other.project["developerId"] = tree.developer["id"]
    tree.apply_parents(engine, ctx)
    other.apply_parents(engine, ctx, with_developer=False)
    foreign_group = {**tree.layout, "id": tid(), "layoutGroupId": other.group["id"]}
    missing_group = {**tree.layout, "id": tid(), "layoutGroupId": tid()}
    result = apply(engine, "layout", [foreign_group, missing_group], ctx)
    assert result.quarantined == [
        (foreign_group["id"], SYNC_PARENT_MISMATCH),
        (missing_group["id"], SYNC_PARENT_NOT_FOUND),
    ]
    foreign_layout = tree.obj("1-1-1", layoutId=other.layout["id"])
    no_layout = tree.obj("1-1-2", layoutId=None)
    result = apply(engine, "propertyObject", [foreign_layout, no_layout], ctx)
    assert result.quarantined == [(foreign_layout["id"], SYNC_PARENT_MISMATCH)]
    assert result.applied == 1


def test_children_of_a_soft_deleted_parent_are_applied(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.building["deletedAt"] = "2024-05-01T10:00:00Z"
    tree.apply_parents(engine, ctx)
    assert one(engine, "SELECT deleted_at FROM chessboard.buildings")["deleted_at"] == datetime(
        2024, 5, 1, 10, tzinfo=UTC
    )
    assert apply(engine, "propertyObject", [tree.obj("1-1-1")], ctx).applied == 1


def test_duplicate_numbers_within_a_batch_and_against_the_replica(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    a, b = tree.obj("1-1-1"), tree.obj("1-1-1")
    deleted_twin = tree.obj("1-1-1", deletedAt="2024-01-01T00:00:00Z")
    result = apply(engine, "propertyObject", [a, b, deleted_twin], ctx)
    assert (result.applied, result.failed) == (2, 1)
    assert result.quarantined == [(b["id"], SYNC_DUPLICATE_NUMBER)]
    # against a live row already in the replica (another external id)
    c = tree.obj("1-1-1")
    assert apply(engine, "propertyObject", [c], ctx).quarantined == [(c["id"], SYNC_DUPLICATE_NUMBER)]
    # the holder moves to another number in the same batch, before the newcomer: the number is free
    moved = {**a, "version": 2, "number": "1-1-9"}
    result = apply(engine, "propertyObject", [moved, c], ctx)
    assert (result.applied, result.failed) == (2, 0)
    # the holder is deleted by a later snapshot: its number is free again
    gone = {**c, "version": 2, "deletedAt": "2024-02-01T00:00:00Z"}
    d = tree.obj("1-1-1")
    assert apply(engine, "propertyObject", [gone, d], ctx).applied == 2
    live = rows(
        engine, "SELECT number FROM chessboard.property_objects WHERE deleted_at IS NULL ORDER BY number"
    )
    assert [r["number"] for r in live] == ["1-1-1", "1-1-9"]
    codes = [
        r["error_code"] for r in rows(engine, "SELECT error_code FROM chessboard.talent_import_failed_items")
    ]
    assert codes == [SYNC_DUPLICATE_NUMBER, SYNC_DUPLICATE_NUMBER]


def test_sold_over_a_pin_hold_is_a_status_conflict(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    held, talent_reserved = tree.obj("1-1-1"), tree.obj("1-1-2", "Reserved")
    apply(engine, "propertyObject", [held, talent_reserved], ctx)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE chessboard.property_objects SET status = 'Reserved', status_source = 'Crm' "
                "WHERE number = '1-1-1'"
            )
        )
    result = apply(
        engine,
        "propertyObject",
        [{**held, "version": 2, "status": "Sold"}, {**talent_reserved, "version": 2, "status": "Sold"}],
        ctx,
    )
    assert result.quarantined == [(held["id"], SYNC_STATUS_CONFLICT)]
    assert result.applied == 1
    statuses = {
        r["number"]: (r["status"], r["status_source"])
        for r in rows(engine, "SELECT number, status, status_source FROM chessboard.property_objects")
    }
    assert statuses == {"1-1-1": ("Reserved", "Crm"), "1-1-2": ("Sold", "TalentSync")}


def test_soft_delete_by_snapshot_and_by_tombstone(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    by_snapshot, by_tombstone = tree.obj("1-1-1"), tree.obj("1-1-2")
    apply(engine, "propertyObject", [by_snapshot, by_tombstone], ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.outbox_messages"))
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    deleted = {**by_snapshot, "version": 2, "deletedAt": "2024-03-01T12:00:00+03:00"}
    assert apply(engine, "propertyObject", [deleted], ctx).applied == 1
    row = one(engine, "SELECT deleted_at, version FROM chessboard.property_objects WHERE number = '1-1-1'")
    assert row == {"deleted_at": datetime(2024, 3, 1, 9, tzinfo=UTC), "version": 2}
    (event,) = outbox(engine, "property-object-upserted")
    assert event["payload"]["deletedAt"] is not None and event["payload"]["version"] == 2

    with engine.begin() as conn:
        result = apply_tombstones(
            conn,
            "propertyObject",
            [uuid.UUID(by_tombstone["id"]), uuid.UUID(by_snapshot["id"]), uuid.uuid4()],
            ctx,
        )
    assert (result.planned, result.applied, result.skipped, result.events) == (3, 1, 2, 1)
    row = one(engine, "SELECT deleted_at, version FROM chessboard.property_objects WHERE number = '1-1-2'")
    assert row["deleted_at"] is not None and row["version"] == 2
    payloads = [e["payload"] for e in outbox(engine, "property-object-upserted")]
    assert payloads[-1]["id"] == str(pid("propertyObject", by_tombstone)) and payloads[-1]["deletedAt"]
    # one request per project per import run, however many batches of the run touched it
    assert (
        one(engine, "SELECT requested_count FROM chessboard.project_recalc_requests")["requested_count"] == 1
    )
    with engine.begin() as conn:
        again = apply_tombstones(conn, "propertyObject", [uuid.UUID(by_tombstone["id"])], ctx)
    assert (again.applied, again.skipped, again.events) == (0, 1, 0)
    # a Kafka key that is no UUID is poison, not a page failure
    with engine.begin() as conn:
        junk = apply_tombstones(conn, "propertyObject", ["not-a-key", None, by_tombstone["id"].upper()], ctx)
    assert (junk.planned, junk.applied, junk.skipped, junk.failed) == (3, 0, 1, 2)
    assert junk.quarantined == [("not-a-key", SYNC_VALIDATION_FAILED), (None, SYNC_VALIDATION_FAILED)]
    payloads = [
        r["payload"]
        for r in rows(engine, "SELECT payload FROM chessboard.talent_import_failed_items ORDER BY id")
    ]
    assert payloads == [{"id": "not-a-key", "tombstone": True}, {"id": None, "tombstone": True}]

    # a tombstoned project: upserted event with the project payload, its own recalc request
    with engine.begin() as conn:
        result = apply_tombstones(conn, "project", [uuid.UUID(tree.project["id"])], ctx)
    assert result.applied == 1
    assert outbox(engine, "project-upserted")[-1]["payload"]["version"] == 2

"""The project rules of docs/store.md v1.2 on the apply path: a project's owner never changes, a
deleted project is Archived (its row and its event), and the recalc keeps skipping it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.errors import SYNC_IMMUTABLE_CHANGED
from pin_chessboard_pipelines.recalc.project import ProjectContext, process_project
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache, load_handbook
from tests.support.replica import Tree, apply, counts, one, outbox, pid, rows, tid


def test_a_project_with_another_developer_is_quarantined_and_the_row_untouched(engine, make_ctx):
    tree = Tree()
    tree.apply_parents(engine, make_ctx())
    other = {"id": tid(), "version": 1, "name": "ГК Юг"}
    assert apply(engine, "developer", [other], make_ctx()).applied == 1
    stored = one(engine, "SELECT * FROM chessboard.projects")
    before = counts(engine)

    moved = {**tree.project, "developerId": other["id"], "version": 9, "name": "ЖК Южный"}
    result = apply(engine, "project", [moved], make_ctx(run_id=None, stage=""))

    assert (result.applied, result.skipped, result.failed) == (0, 0, 1)
    assert result.quarantined == [(tree.project["id"], SYNC_IMMUTABLE_CHANGED)]
    assert one(engine, "SELECT * FROM chessboard.projects") == stored  # nothing of it applied
    after = counts(engine)
    assert after["talent_import_failed_items"] == before["talent_import_failed_items"] + 1
    # no event, no recalc request
    assert {k: v for k, v in after.items() if k != "talent_import_failed_items"} == {
        k: v for k, v in before.items() if k != "talent_import_failed_items"
    }
    failed = one(engine, "SELECT error_code, error_message FROM chessboard.talent_import_failed_items")
    assert failed["error_code"] == SYNC_IMMUTABLE_CHANGED and "immutable" in failed["error_message"]

    # the same developer again: applied as always
    renamed = {**tree.project, "version": 10, "name": "ЖК Северный-2"}
    assert apply(engine, "project", [renamed], make_ctx()).applied == 1
    assert one(engine, "SELECT name, developer_id FROM chessboard.projects") == {
        "name": "ЖК Северный-2",
        "developer_id": stored["developer_id"],
    }


@pytest.mark.parametrize("how", ["deletedAt", "tombstone"])
def test_a_deleted_project_is_archived_in_the_row_and_its_event(engine, make_ctx, how):
    from pin_chessboard_pipelines.replica.apply import apply_tombstones

    tree = Tree()
    tree.apply_parents(engine, make_ctx())
    if how == "deletedAt":
        deleted = {**tree.project, "version": 4, "deletedAt": "2026-12-01T09:00:00Z"}
        assert apply(engine, "project", [deleted], make_ctx()).applied == 1
    else:
        with engine.begin() as conn:
            assert apply_tombstones(conn, "project", [tree.project["id"]], make_ctx()).applied == 1
    row = one(engine, "SELECT status, deleted_at, version FROM chessboard.projects")
    assert row["status"] == "Archived" and row["deleted_at"] is not None and row["version"] == 2
    last = outbox(engine, "project-upserted")[-1]["payload"]
    assert (last["status"], last["version"]) == ("Archived", 2)


def test_a_project_created_deleted_is_archived_from_the_start(engine, make_ctx):
    tree = Tree()
    tree.apply_parents(engine, make_ctx(), with_developer=True)
    born_deleted = {**tree.project, "id": tid(), "deletedAt": "2026-12-01T09:00:00Z"}
    assert apply(engine, "project", [born_deleted], make_ctx()).applied == 1
    row = one(
        engine, "SELECT status FROM chessboard.projects WHERE id = :id", id=pid("project", born_deleted)
    )
    assert row["status"] == "Archived"
    assert outbox(engine, "project-upserted")[-1]["payload"]["status"] == "Archived"


def test_the_recalc_skips_an_archived_project(engine, make_ctx):
    tree = Tree()
    tree.apply_parents(engine, make_ctx())
    assert apply(engine, "propertyObject", [tree.obj("1")], make_ctx()).applied == 1
    deleted = {**tree.project, "version": 4, "deletedAt": "2026-12-01T09:00:00Z"}
    assert apply(engine, "project", [deleted], make_ctx()).applied == 1
    project = one(engine, "SELECT * FROM chessboard.projects")
    before = len(rows(engine, "SELECT id FROM chessboard.outbox_messages"))

    with engine.begin() as conn:  # the apply path queued its recalc request: due now
        conn.execute(sa.text("UPDATE chessboard.project_recalc_requests SET due_at = now()"))
        handbook = load_handbook(conn)
    with engine.connect() as conn:
        outcome = process_project(
            conn,
            project["id"],
            ProjectContext(poison_attempts=5, handbooks=HandbookCache(handbook), correlation_id="test"),
        )

    assert outcome.result == "skipped_archived"
    after = one(engine, "SELECT * FROM chessboard.projects")
    assert (after["property_objects_total_count"], after["version"]) == (0, project["version"])
    assert len(rows(engine, "SELECT id FROM chessboard.outbox_messages")) == before

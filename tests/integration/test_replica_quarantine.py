"""Quarantine rows and reports of the apply path: poison items, the streaming run id, unknown enums."""

from __future__ import annotations

import uuid

from pin_chessboard_pipelines.errors import (
    SYNC_VALIDATION_FAILED,
)
from pin_chessboard_pipelines.replica.apply import (
    STREAMING_RUN_ID,
)
from tests.support.replica import (
    Tree,
    apply,
    one,
    outbox,
    rows,
)


def test_poison_is_quarantined_again_in_a_laterapply_in_pages(engine, make_ctx):
    tree = Tree()
    tree.apply_parents(engine, make_ctx())
    poison = tree.obj("1-1-1", floor=201)
    for run in (uuid.uuid4(), uuid.uuid4()):
        result = apply(engine, "propertyObject", [poison], make_ctx(run_id=run, stage="PropertyObjects"))
        assert (result.failed, result.skipped, result.applied) == (1, 0, 0)
        assert result.quarantined == [(poison["id"], SYNC_VALIDATION_FAILED)]
    failed = rows(engine, "SELECT run_id, error_message FROM chessboard.talent_import_failed_items")
    assert len({r["run_id"] for r in failed}) == 2
    assert "floor" in failed[0]["error_message"]


def test_streaming_sync_quarantines_under_the_nil_run_id(engine, make_ctx):
    ctx = make_ctx(run_id=None, stage="")
    bad = {"id": "not-a-uuid", "version": 1, "name": "x"}
    result = apply(engine, "developer", [bad, {"version": 1}], ctx)
    assert result.failed == 2
    failed = rows(
        engine,
        "SELECT run_id, stage, external_id, payload FROM chessboard.talent_import_failed_items ORDER BY id",
    )
    assert [(r["run_id"], r["stage"], r["external_id"]) for r in failed] == [
        (STREAMING_RUN_ID, "Developers", "not-a-uuid"),
        (STREAMING_RUN_ID, "Developers", None),
    ]
    assert failed[1]["payload"] == {"version": 1}


def test_unknown_enums_and_unresolved_references(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.project.update(type="Castle", constructionStatus="Frozen", regionId=999, cityId=2)
    tree.apply_parents(engine, ctx)
    project = one(engine, "SELECT type, construction_status, region_id, city_id FROM chessboard.projects")
    assert project == {
        "type": "ResidentialComplex",
        "construction_status": "UnderConstruction",
        "region_id": None,
        "city_id": 2,
    }
    result = apply(engine, "propertyObject", [tree.obj("1-1-1", "Frozen")], ctx)
    assert result.unknown_enums == [("propertyObject.status", "Frozen")]
    assert one(engine, "SELECT status FROM chessboard.property_objects")["status"] == "Hidden"
    payload = outbox(engine, "project-upserted")[0]["payload"]
    assert (payload["regionId"], payload["regionSnapshot"]) == (None, None)
    assert payload["citySnapshot"] == {"id": 2, "name": "Санкт-Петербург"}

"""Per-developer figures of an import (the Dagster partitions' metadata): an orphan (an object
whose building is not in the replica) counts under the developer whose listing it came from; one
read by an unfiltered listing stays unattributed ("")."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from pin_chessboard_pipelines.replica.apply import apply_snapshots
from pin_chessboard_pipelines.talent_import import page_queue, runs
from pin_chessboard_pipelines.talent_import.result import StageCounters
from tests.support.import_runs import insert_import_run
from tests.support.replica import RUN_ID, Tree, context_factory, pid, tid


def _page(conn, scope: str, page_no: int) -> page_queue.ClaimedPage:
    page_id = conn.execute(
        sa.text(
            "INSERT INTO chessboard.talent_import_pages (run_id, stage, page_no, scope, status) "
            "VALUES (:run, 'PropertyObjects', :no, :scope, 'InProgress') RETURNING id"
        ),
        {"run": RUN_ID, "no": page_no, "scope": scope},
    ).scalar_one()
    return page_queue.ClaimedPage(page_id, scope, page_no, None, 0, uuid.uuid4())


def test_an_orphan_counts_under_the_developer_of_its_listing(engine):
    ctx = context_factory(engine)()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    insert_import_run(engine, RUN_ID, page_size=3)
    for page_no, scope in enumerate((tree.developer["id"], "")):  # a developer's listing, then all
        items = [
            tree.obj(f"{page_no}-1"),
            tree.obj(f"{page_no}-2"),
            tree.obj(f"{page_no}-3", buildingId=tid()),
        ]
        with engine.begin() as conn:
            result = apply_snapshots(conn, "propertyObject", items, ctx)
            assert (result.applied, result.failed) == (2, 1)
            page_queue.complete_page(
                conn, _page(conn, scope, page_no), len(items), result, run_id=RUN_ID, stage="PropertyObjects"
            )
    with engine.connect() as conn:
        counters = runs.stage_tenant_counters(conn, RUN_ID, "PropertyObjects")
    developer = str(pid("developer", tree.developer))
    assert counters == {
        developer: StageCounters(planned=5, applied=4, skipped=0, failed=1),
        "": StageCounters(planned=1, applied=0, skipped=0, failed=1),
    }

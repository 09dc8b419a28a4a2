"""A DryRun of the apply path: nothing stored, counts and decisions as a real run."""

from __future__ import annotations

import threading
import uuid

from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
)
from pin_chessboard_pipelines.replica.apply import (
    ApplyResult,
    DryRunState,
    apply_tombstones,
)
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.replica import (
    Tree,
    apply,
    apply_in_pages,
    counts,
    one,
    stage_items,
    tid,
)


def test_dry_run_writes_nothing_and_counts_like_a_realapply_in_pages(engine, make_ctx):
    spec = DatasetSpec(
        developers=2,
        projects_per_developer=2,
        buildings_per_project=2,
        objects_per_project=40,
        poison_every=9,
        unknown_enum_every=7,
        deleted_every=11,
        unknown_reference_every=3,
    )
    stages = stage_items(spec)
    orphan = {**stages[-1][1][0], "id": tid(), "buildingId": tid()}
    stages[-1][1].append(orphan)
    state = DryRunState()
    empty = counts(engine)
    dry = apply_in_pages(engine, make_ctx(dry_run=True, dry_run_state=state), stages)
    assert counts(engine) == empty
    assert dry["propertyObject"][3] > 3  # poison, duplicates and the orphan counted as failed
    real = apply_in_pages(engine, make_ctx(), stages)
    assert dry == real
    # the DryRun state is shared by workers: a second dry run over the same state sees everything applied
    again = apply_in_pages(engine, make_ctx(dry_run=True, dry_run_state=state), stages[:1])
    assert again["developer"] == (2, 0, 2, 0)


def test_dry_run_sees_its_own_duplicates_and_deletions(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    holder = tree.obj("1-1-1")
    apply(engine, "propertyObject", [holder], ctx)
    empty = counts(engine)
    dry = make_ctx(dry_run=True, dry_run_state=DryRunState())
    newcomer = tree.obj("1-1-1")
    assert apply(engine, "propertyObject", [newcomer], dry).quarantined == [
        (newcomer["id"], SYNC_DUPLICATE_NUMBER)
    ]
    with engine.begin() as conn:
        assert apply_tombstones(conn, "propertyObject", [uuid.UUID(holder["id"])], dry).applied == 1
    result = apply(engine, "propertyObject", [newcomer, tree.obj("1-1-1")], dry)
    assert (result.applied, result.failed) == (1, 1)
    assert counts(engine) == empty


def test_dry_run_state_is_shared_by_worker_threads(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    # 4 pages of 10 objects; every number appears on two pages: 20 applied, 20 duplicates
    pages = [[tree.obj(f"n-{(page % 2) * 10 + i}") for i in range(10)] for page in range(4)]
    dry = make_ctx(dry_run=True, dry_run_state=DryRunState())
    results: list[ApplyResult] = []
    errors: list[BaseException] = []

    def worker(page: list[dict]) -> None:
        try:
            results.append(apply(engine, "propertyObject", page, dry))
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(page,)) for page in pages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert sum(r.applied for r in results) == 20 and sum(r.failed for r in results) == 20
    assert {code for r in results for _, code in r.quarantined} == {SYNC_DUPLICATE_NUMBER}
    assert one(engine, "SELECT count(*) AS n FROM chessboard.property_objects")["n"] == 0

"""`import replay-failed`: quarantined items read again by id once Talent is fixed, applied through
the import's path, and out of the quarantine when they applied."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.errors import IMPORT_LOCK_HELD, Refused
from pin_chessboard_pipelines.talent.client import TalentApiClient
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.lock import ImportLock
from pin_chessboard_pipelines.talent_import.replay_failed import replay_failed
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource

# every event written meets its schema (tests/support/contracts.py)
pytestmark = pytest.mark.usefixtures("outbox_contract")

BROKEN = DatasetSpec(developers=1, projects_per_developer=2, objects_per_project=12, poison_every=5)
FIXED = DatasetSpec(**{**BROKEN.__dict__, "poison_every": 0})


def _count(engine, sql: str, **params) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar_one()


def _import(db_url, sim):
    return ImportSession(
        db_url,
        build_request(page_size=5),
        ApiPullSource(sim.url),
        options=ImportOptions(lock_timeout_seconds=1, retry_seconds=0.05),
    ).run_here()


def _replay(engine, db_url, sim, run_id=None, lock_timeout=5.0, page_size=500):
    client = TalentApiClient(sim.url)
    try:
        return replay_failed(
            engine,
            client,
            run_id=run_id,
            correlation_id=str(uuid.uuid4()),
            debounce_seconds=30,
            cap_seconds=300,
            lock_timeout_seconds=lock_timeout,
            url=db_url,
            page_size=page_size,
        )
    finally:
        client.close()


def test_quarantined_items_are_replayed_by_id_once_talent_is_fixed(db_url, engine, talent_sim):
    sim = talent_sim(BROKEN)
    imported = _import(db_url, sim)
    total = dataset.count(BROKEN, "property-objects")
    quarantined = _count(engine, "SELECT count(*) FROM chessboard.talent_import_failed_items")
    assert imported.status == "Completed" and quarantined > 0
    assert _count(engine, "SELECT count(*) FROM chessboard.property_objects") == total - quarantined

    # still broken: the items fail again, their rows are replaced, nothing else changes
    again = _replay(engine, db_url, sim, run_id=uuid.UUID(imported.run_id))
    assert again.stages["PropertyObjects"].failed == quarantined
    assert _count(engine, "SELECT count(*) FROM chessboard.talent_import_failed_items") == quarantined

    sim.set_spec(FIXED)  # Talent fixed the data
    fixed = _replay(engine, db_url, sim, run_id=uuid.UUID(imported.run_id))
    result = fixed.to_dict()
    assert (result["status"], result["runId"]) == ("Completed", imported.run_id)
    assert result["stages"]["PropertyObjects"] == {
        "planned": quarantined,
        "applied": quarantined,
        "skipped": 0,
        "failed": 0,
    }
    assert result["removedFromQuarantine"] == quarantined and result["missingInTalent"] == 0
    assert _count(engine, "SELECT count(*) FROM chessboard.talent_import_failed_items") == 0
    assert _count(engine, "SELECT count(*) FROM chessboard.property_objects") == total
    # the replayed objects' projects are requested for a recalc
    assert _count(engine, "SELECT count(*) FROM chessboard.project_recalc_requests") >= 1


def test_a_replay_waits_for_the_import_lock(db_url, engine, talent_sim):
    sim = talent_sim(BROKEN)
    with ImportLock(db_url) as other:
        other.acquire(0)
        with pytest.raises(Refused) as refused:
            _replay(engine, db_url, sim, lock_timeout=0.2)
    assert refused.value.code == IMPORT_LOCK_HELD


def test_a_failing_page_rolls_back_alone(db_url, engine, talent_sim):
    """One transaction per page: an item whose write fails (a trigger of the test's own refuses it)
    rolls back its page only; the pages before and after it leave the quarantine, the replay ends
    Failed with the page's error, and the failed page's rows stay for the next replay."""
    sim = talent_sim(BROKEN)
    imported = _import(db_url, sim)
    with engine.connect() as conn:
        ids = (
            conn.execute(
                sa.text(
                    "SELECT external_id FROM chessboard.talent_import_failed_items "
                    "WHERE stage = 'PropertyObjects' ORDER BY id"
                )
            )
            .scalars()
            .all()
        )
    ids = sorted(ids, key=str.lower)  # the replay reads property objects by id, in id order
    assert len(ids) >= 4
    bad = ids[2]  # the first item of the second page of 2
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE FUNCTION chessboard.refuse_one_object() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF NEW.external_talent_id = '{bad}' THEN RAISE EXCEPTION 'object {bad} refused'; "
                "END IF; RETURN NEW; END $$"
            )
        )
        conn.execute(
            sa.text(
                "CREATE TRIGGER refuse_one_object BEFORE INSERT OR UPDATE ON chessboard.property_objects "
                "FOR EACH ROW EXECUTE FUNCTION chessboard.refuse_one_object()"
            )
        )
    sim.set_spec(FIXED)
    result = _replay(engine, db_url, sim, run_id=uuid.UUID(imported.run_id), page_size=2)
    summary = result.to_dict()
    assert summary["status"] == "Failed" and summary["failedPages"] == 1
    assert (
        summary["error"].startswith("PropertyObjects page 1: ")
        and f"object {bad} refused" in summary["error"]
    )
    assert summary["removedFromQuarantine"] == len(ids) - 2
    assert summary["stages"]["PropertyObjects"]["applied"] == len(ids) - 2
    with engine.connect() as conn:
        left = (
            conn.execute(sa.text("SELECT external_id FROM chessboard.talent_import_failed_items ORDER BY id"))
            .scalars()
            .all()
        )
        stored = conn.execute(
            sa.text(
                "SELECT count(*) FROM chessboard.property_objects WHERE external_talent_id::text = ANY(:ids)"
            ),
            {"ids": ids},
        ).scalar_one()
    assert sorted(left, key=str.lower) == ids[2:4]  # the failed page's rows, as they were
    assert stored == len(ids) - 2

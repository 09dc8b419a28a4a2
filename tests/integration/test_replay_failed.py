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
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, run_import
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource

BROKEN = DatasetSpec(developers=1, projects_per_developer=2, objects_per_project=12, poison_every=5)
FIXED = DatasetSpec(**{**BROKEN.__dict__, "poison_every": 0})


def _count(engine, sql: str, **params) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar_one()


def _replay(engine, db_url, sim, run_id=None, lock_timeout=5.0):
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
        )
    finally:
        client.close()


def test_quarantined_items_are_replayed_by_id_once_talent_is_fixed(db_url, engine, talent_sim):
    sim = talent_sim(BROKEN)
    imported = run_import(
        db_url,
        build_request(page_size=5),
        ApiPullSource(sim.url),
        options=ImportOptions(lock_timeout_seconds=1, retry_seconds=0.05),
    )
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

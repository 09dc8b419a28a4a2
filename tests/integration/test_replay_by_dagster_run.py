"""`talent_replay_failed` named by the id the UI shows: the import's Dagster run id resolves to its
import run, the quarantined items are replayed and each stage's `no_quarantined_items` is evaluated
again on its latest materialization; an id that names no import, or an import with nothing
quarantined, fails the run in one line."""

from __future__ import annotations

import uuid

import dagster as dg
import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import import config as talent_config
from pin_chessboard_pipelines.defs.talent_import.definitions import definitions
from pin_chessboard_pipelines.defs.talent_import.replay import REPLAY_JOB, REPLAY_OP
from pin_chessboard_pipelines.errors import IMPORT_INVALID_REQUEST
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

pytestmark = pytest.mark.slow

BROKEN = DatasetSpec(developers=2, projects_per_developer=1, objects_per_project=10, poison_every=5)
FIXED = DatasetSpec(**{**BROKEN.__dict__, "poison_every": 0})
PROPERTY_OBJECTS = talent_config.ASSET_KEYS["PropertyObjects"]


@pytest.fixture
def sim(monkeypatch, db_url, talent_sim):
    sim = talent_sim(BROKEN)
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    monkeypatch.setenv("TALENT_API_URL", sim.url)
    monkeypatch.setenv("CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS", "0.2")
    return sim


def _defs() -> dg.Definitions:
    return dg.Definitions.merge(
        definitions(),
        dg.Definitions(resources={"chessboard": ChessboardResource()}, executor=dg.in_process_executor),
    )


def _quarantined(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM chessboard.talent_import_failed_items")
        ).scalar_one()


def _checks(result) -> list:
    """The run's `no_quarantined_items` evaluations."""
    return [
        e.event_specific_data
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
        and e.event_specific_data.check_name == talent_config.QUARANTINE_CHECK
    ]


def _replay(instance, run_id: str):
    job = _defs().resolve_job_def(REPLAY_JOB)
    return job.execute_in_process(
        instance=instance,
        run_config={"ops": {REPLAY_OP: {"config": {"run_id": run_id}}}},
        raise_on_error=False,
    )


def _failure(result) -> str:
    [failure] = [e for e in result.all_events if e.is_step_failure]
    return failure.step_failure_data.user_failure_data.description


def test_a_replay_by_the_dagster_run_id_empties_the_quarantine_and_turns_the_check_green(sim, engine):
    developers = [dataset.entity_id(BROKEN, "developers", i) for i in range(BROKEN.developers)]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(talent_config.TALENT_DEVELOPERS.name, developers)
        imported = (
            _defs()
            .resolve_job_def(talent_config.IMPORT_JOB)
            .execute_in_process(
                instance=instance,
                run_config={"resources": {"talent_import": {"config": {"page_size": 4}}}},
                tags={
                    "dagster/asset_partition_range_start": developers[0],
                    "dagster/asset_partition_range_end": developers[-1],
                },
            )
        )
        assert imported.success
        quarantined = _quarantined(engine)
        assert quarantined > 0
        [red] = [c for c in _checks(imported) if c.asset_key == PROPERTY_OBJECTS]
        assert not red.passed

        unknown = _replay(instance, str(uuid.uuid4()))  # names no import: a failure, not a no-op
        assert not unknown.success
        assert _failure(unknown).startswith(f"{IMPORT_INVALID_REQUEST}: nothing to replay: no import run")
        assert _quarantined(engine) == quarantined

        sim.set_spec(FIXED)
        replayed = _replay(instance, imported.run_id)  # the Dagster run id, as the UI shows it
        assert replayed.success
        [output] = [e for e in replayed.all_events if e.is_successful_output]
        summary = output.step_output_data.metadata["summary"].value
        assert summary["removedFromQuarantine"] == quarantined
        assert _quarantined(engine) == 0
        latest = instance.fetch_materializations(PROPERTY_OBJECTS, limit=1).records[0]
        [green] = [c for c in _checks(replayed) if c.asset_key == PROPERTY_OBJECTS]
        assert green.passed
        assert green.target_materialization_data.storage_id == latest.storage_id
        assert green.metadata["failed"].value == 0
        # every stage the import materialized is evaluated again, all green now
        assert len(_checks(replayed)) == len(talent_config.ASSET_KEYS)
        assert all(c.passed for c in _checks(replayed))

        again = _replay(instance, imported.run_id)  # nothing quarantined left: says so, fails
        assert not again.success
        assert "has no quarantined item" in _failure(again)

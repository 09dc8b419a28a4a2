"""The Dagster shell of the streaming sync: the job, its sensor and `pin-chessboard talent-sync`."""

from __future__ import annotations

import json
import threading

import dagster as dg
import pytest

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import SINGLETON_TAG
from pin_chessboard_pipelines.defs.talent_sync.definitions import (
    JOB_NAME,
    OP_NAME,
    definitions,
    talent_sync,
    talent_sync_sensor,
)
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset
from pin_chessboard_pipelines.talent_sync import TalentSync
from tests.support.polling import wait_until
from tests.support.talent_kafka import count

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.usefixtures("broker_in_settings")]

SPEC = DatasetSpec(developers=1, projects_per_developer=2, objects_per_project=10)


def _resources(db_url: str) -> dict:
    return {"chessboard": ChessboardResource(database_url=db_url)}


def _sensor(db_url: str, instance: dg.DagsterInstance):
    return talent_sync_sensor(dg.build_sensor_context(instance=instance, resources=_resources(db_url)))


def test_sync_job_applies_the_topics_and_reports_metadata(db_url, engine, broker):
    publish_dataset(SPEC, broker)
    with dg.DagsterInstance.ephemeral() as instance:
        result = talent_sync.execute_in_process(
            instance=instance,
            resources=_resources(db_url),
            run_config={"ops": {OP_NAME: {"config": {"time_budget_seconds": 60}}}},
        )
    assert result.success
    (output,) = [e for e in result.events_for_node(OP_NAME) if e.is_successful_output]
    metadata = {k: v.value for k, v in output.step_output_data.metadata.items()}
    total = sum(
        dataset.count(SPEC, c) for c in ("developers", "projects", "buildings", "layout-groups", "layouts")
    )
    total += dataset.count(SPEC, "property-objects")
    assert metadata["messages"] == metadata["applied"] == total
    assert metadata["stopped"] == "done" and metadata["messages_per_second"] > 0
    assert count(engine, "SELECT count(*) FROM chessboard.property_objects") == dataset.count(
        SPEC, "property-objects"
    )
    headers = count(engine, "SELECT headers->>'correlationId' FROM chessboard.outbox_messages LIMIT 1")
    assert headers == result.run_id


def test_sync_job_refuses_when_the_flag_is_off(db_url, broker, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_TALENT_SYNC_ENABLED", "false")
    with dg.DagsterInstance.ephemeral() as instance:
        result = talent_sync.execute_in_process(
            instance=instance, resources=_resources(db_url), raise_on_error=False
        )
        sensed = _sensor(db_url, instance)
    assert not result.success
    assert isinstance(sensed, dg.SkipReason) and "flag" in sensed.skip_message


def test_sensor_starts_a_run_for_uncommitted_messages_only(db_url, engine, broker):
    with dg.DagsterInstance.ephemeral() as instance:
        unreadable = _sensor(db_url, instance)  # no Talent topics yet
        publish_dataset(SPEC, broker)
        lagging = _sensor(db_url, instance)
        defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=_resources(db_url)))
        run = instance.create_run_for_job(
            job_def=defs.resolve_job_def(JOB_NAME), status=dg.DagsterRunStatus.STARTED
        )
        busy = _sensor(db_url, instance)
        instance.report_run_canceled(run)
        TalentSync(engine, broker, poll_timeout=0.1).run(until_idle=True, max_seconds=60)
        caught_up = _sensor(db_url, instance)
    assert isinstance(unreadable, dg.SkipReason) and "cannot be read" in unreadable.skip_message
    assert isinstance(lagging, dg.SensorResult)
    (request,) = lagging.run_requests
    assert request.tags[SINGLETON_TAG] == "talent-sync"
    assert request.tags["pin/talent-sync-lag"] == str(sum(publish_counts()))
    assert lagging.cursor is None
    assert isinstance(busy, dg.SkipReason) and run.run_id in busy.skip_message
    assert isinstance(caught_up, dg.SkipReason) and "caught up" in caught_up.skip_message


def publish_counts() -> list[int]:
    return [
        dataset.count(SPEC, c)
        for c in ("developers", "projects", "buildings", "layout-groups", "layouts", "property-objects")
    ]


def test_talent_sync_command_until_idle_and_its_refusals(cli_env, engine, broker, monkeypatch, capsys):
    assert main(["talent-sync", "--until-idle"]) == 2  # no Talent topics yet
    assert capsys.readouterr().err.startswith("CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: talent-sync: ")

    publish_dataset(SPEC, broker)
    assert main(["talent-sync", "--until-idle", "--time-budget", "60"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Completed" and summary["messages"] == sum(publish_counts())
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs(filters=dg.RunsFilter(job_name=JOB_NAME))
    assert run.run_id == summary["runId"]

    stop = threading.Event()
    worker = threading.Thread(
        target=lambda: TalentSync(engine, broker, poll_timeout=0.1).run(should_stop=stop.is_set)
    )
    worker.start()
    try:
        wait_until(lambda: count(engine, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") > 0)
        assert main(["talent-sync", "--until-idle"]) == 2
        assert capsys.readouterr().err.startswith("CHESSBOARD_SYNC_LOCK_HELD: ")
    finally:
        stop.set()
        worker.join(timeout=30)

    monkeypatch.setenv("CHESSBOARD_TALENT_SYNC_ENABLED", "false")
    assert main(["talent-sync"]) == 2
    assert capsys.readouterr().err.startswith("CHESSBOARD_IMPORT_DISABLED: ")


def test_the_sensor_cursor_shows_why_it_skipped_or_what_it_requested(db_url, broker):
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources=_resources(db_url))
        talent_sync_sensor(context)
        no_topics = context.cursor
        publish_dataset(SPEC, broker)
        talent_sync_sensor(context)
        requested = context.cursor
    assert no_topics is not None and no_topics.startswith("skipped: the Talent topics cannot be read: ")
    assert "missing" in no_topics
    assert requested == f"run requested: {sum(publish_counts())} uncommitted message(s)"

"""The Dagster shell of the outbox relay: the job, its sensor, the lag check, and `outbox relay`."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.definitions import build_definitions
from pin_chessboard_pipelines.defs.outbox.definitions import (
    EVENTS,
    JOB_NAME,
    LAG_CHECK,
    OP_NAME,
    definitions,
    outbox_lag_check,
    outbox_relay,
    outbox_relay_sensor,
)
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import SINGLETON_TAG
from pin_chessboard_pipelines.events.outbox import OutboxEvent, pending_summary, write_outbox
from pin_chessboard_pipelines.events.payloads import DEVELOPER_UPSERTED
from pin_chessboard_pipelines.events.reference_consumer import read_events
from pin_chessboard_pipelines.runtime.embedded import free_port
from pin_chessboard_pipelines.store.tables import outbox_messages


def _resources(db_url: str) -> dict:
    return {"chessboard": ChessboardResource(database_url=db_url)}


def _write(engine, n: int = 3, age_seconds: float = 0.0) -> list[OutboxEvent]:
    occurred = datetime.now(UTC) - timedelta(seconds=age_seconds)
    events = [
        OutboxEvent(DEVELOPER_UPSERTED, str(uuid.uuid4()), {"version": 1}, occurred_at=occurred)
        for _ in range(n)
    ]
    with engine.begin() as conn:
        write_outbox(conn, events)
    return events


def _run(db_url: str, instance: dg.DagsterInstance, **config) -> dg.ExecuteInProcessResult:
    return outbox_relay.execute_in_process(
        instance=instance,
        resources=_resources(db_url),
        run_config={"ops": {OP_NAME: {"config": config}}},
        raise_on_error=False,
    )


def _output_metadata(result: dg.ExecuteInProcessResult) -> dict:
    (output,) = [e for e in result.events_for_node(OP_NAME) if e.is_successful_output]
    return {k: v.value for k, v in output.step_output_data.metadata.items()}


def test_relay_job_publishes_purges_and_reports_plottable_metadata(db_url, engine, kafka_bootstrap):
    events = _write(engine, 4)
    old = _write(engine, 2)
    with engine.begin() as conn:
        conn.execute(
            sa.update(outbox_messages)
            .where(outbox_messages.c.message_id.in_([e.message_id for e in old]))
            .values(published_at=datetime.now(UTC) - timedelta(days=30))
        )
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(db_url, instance, bootstrap_servers=kafka_bootstrap)
        published = [e for e in result.all_events if e.event_type_value == "ASSET_MATERIALIZATION"]
        check_key = dg.AssetCheckKey(EVENTS.key, LAG_CHECK)
        latest = instance.event_log_storage.get_latest_asset_check_execution_by_key([check_key])[check_key]
        materialized = instance.fetch_materializations(EVENTS.key, limit=1).records[0]
    assert result.success
    # the lag check is evaluated on the materialization, right after it (not "Not evaluated"), as
    # an event of its own that names the run
    evaluation = latest.event.dagster_event.event_specific_data
    assert evaluation.passed and result.run_id in evaluation.metadata["evaluated_by"].value
    assert evaluation.target_materialization_data.storage_id == materialized.storage_id
    metadata = _output_metadata(result)
    assert (metadata["published"], metadata["purged"], metadata["backlog"]) == (4, 2, 0)
    assert metadata["messages_per_second"] > 0 and metadata["failed_attempts"] == 0
    assert len(published) == 1  # a publish is a new version of the topics: a materialization
    materialization = published[0].event_specific_data.materialization
    assert materialization.asset_key == EVENTS.key
    assert materialization.metadata["published"].value == 4
    assert materialization.metadata["path"].value == "relay job"
    ids = {str(e.message_id) for e in events}
    read_events(kafka_bootstrap, until=lambda evs: ids <= {e.message_id for e in evs})
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(outbox_messages)).scalar_one() == 4


@pytest.mark.slow
def test_relay_job_fails_when_the_broker_is_down_and_keeps_the_rows(db_url, engine):
    _write(engine, 2)
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(
            db_url,
            instance,
            bootstrap_servers=f"127.0.0.1:{free_port()}",  # nothing listens there
            message_timeout_ms=500,
            time_budget_seconds=2.0,
        )
    assert not result.success
    (failure,) = [e for e in result.events_for_node(OP_NAME) if e.is_step_failure]
    assert "did not acknowledge 2 pending row(s)" in failure.step_failure_data.user_failure_data.description
    assert pending_summary(engine)["backlog"] == 2


def _sensor(db_url: str, instance: dg.DagsterInstance):
    context = dg.build_sensor_context(instance=instance, resources=_resources(db_url))
    return outbox_relay_sensor(context)


def test_sensor_skips_without_pending_rows_and_leaves_fresh_rows_to_the_fast_path(db_url, engine):
    with dg.DagsterInstance.ephemeral() as instance:
        empty = _sensor(db_url, instance)
        _write(engine, 1)
        fresh = _sensor(db_url, instance)
    assert isinstance(empty, dg.SkipReason) and "no pending" in empty.skip_message
    assert isinstance(fresh, dg.SkipReason) and "fast path" in fresh.skip_message


def test_sensor_requests_one_singleton_run_for_rows_the_fast_path_left(db_url, engine):
    _write(engine, 3, age_seconds=10)
    with dg.DagsterInstance.ephemeral() as instance:
        result = _sensor(db_url, instance)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests
    assert request.run_key.startswith("outbox-relay:")
    assert request.tags[SINGLETON_TAG] == "outbox-relay"
    assert request.tags["pin/outbox-backlog"] == "3"
    assert result.cursor is None


def test_sensor_waits_while_a_relay_run_is_queued_or_running(db_url, engine):
    _write(engine, 1, age_seconds=10)
    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=_resources(db_url)))
    job = defs.resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.ephemeral() as instance:
        run = instance.create_run_for_job(job_def=job, status=dg.DagsterRunStatus.STARTED)
        waiting = _sensor(db_url, instance)
        instance.report_run_canceled(run)
        again = _sensor(db_url, instance)
    assert isinstance(waiting, dg.SkipReason) and run.run_id in waiting.skip_message
    assert isinstance(again, dg.SensorResult) and len(again.run_requests) == 1


def test_lag_check_fails_when_the_oldest_pending_row_is_older_than_five_minutes(db_url, engine):
    resources = _resources(db_url)
    fresh = outbox_lag_check(dg.build_asset_check_context(resources=resources))
    _write(engine, 1, age_seconds=600)
    stale = outbox_lag_check(dg.build_asset_check_context(resources=resources))
    assert fresh.passed and fresh.check_name in (None, LAG_CHECK)
    assert not stale.passed and stale.metadata["backlog"].value == 1


@pytest.fixture
def cli_env(cli_env, kafka_bootstrap, monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", kafka_bootstrap)
    return cli_env


def test_outbox_relay_command_runs_the_job_in_the_dagster_instance(cli_env, engine, kafka_bootstrap, capsys):
    events = _write(engine, 5)
    assert main(["outbox", "relay", "--until-empty"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Completed" and summary["published"] == 5 and summary["backlog"] == 0
    assert pending_summary(engine)["backlog"] == 0
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs(filters=dg.RunsFilter(job_name=JOB_NAME))
        # launched with the code location's origin and the job's snapshot: under its job in the UI
        listed = instance.get_runs(
            filters=dg.RunsFilter(
                job_name=JOB_NAME, tags={".dagster/repository": "__repository__@pin_chessboard_pipelines"}
            )
        )
        snapshot_id = build_definitions().resolve_job_def(JOB_NAME).get_job_snapshot_id()
    assert run.run_id == summary["runId"] and run.status == dg.DagsterRunStatus.SUCCESS
    assert [r.run_id for r in listed] == [run.run_id] and run.remote_job_origin is not None
    assert run.job_snapshot_id == snapshot_id  # the UI's Re-execute: no "different version" warning
    ids = {str(e.message_id) for e in events}
    read_events(kafka_bootstrap, until=lambda evs: ids <= {e.message_id for e in evs})

    assert main(["outbox", "events", "--last", "2"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    developer_line = next(line for line in lines if line.startswith("pin.chessboard.developer-upserted.v1"))
    assert int(developer_line.split()[1]) >= 5
    latest = lines[-2:]
    assert all("pin.chessboard.developer-upserted" in line for line in latest)
    assert {line.split("key=")[1].split()[0] for line in latest} <= {e.aggregate_id for e in events}


def test_outbox_relay_command_fails_with_one_json_line_when_the_broker_is_down(
    cli_env, engine, monkeypatch, capsys
):
    _write(engine, 2)
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", f"127.0.0.1:{free_port()}")
    assert main(["outbox", "relay", "--time-budget", "0.5"]) == 1
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Failed" and summary["published"] == 0 and summary["backlog"] == 2
    assert "did not acknowledge" in summary["error"]


def test_outbox_relay_command_rejects_a_bad_time_budget(cli_env, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["outbox", "relay", "--time-budget", "-3"])
    assert exit_info.value.code == 2
    assert "not a positive number of seconds" in capsys.readouterr().err

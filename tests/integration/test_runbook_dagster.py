"""The recalc runbook job (defs/runbook): each step on a real store, the project given by Talent
id, PIN id or name, and the queue's status recorded on `recalc_queue`."""

from __future__ import annotations

import logging

import dagster as dg
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.runbook.definitions import (
    OP_NAME,
    STATUS_ASSET,
    recalc_queue_sensor,
    recalc_runbook,
)
from pin_chessboard_pipelines.recalc.drain import drain
from tests.support.recalc_data import StoreBuilder, queue, standard_project


def _run(db_url: str, instance: dg.DagsterInstance, **config) -> dg.ExecuteInProcessResult:
    return recalc_runbook.execute_in_process(
        instance=instance,
        resources={"chessboard": ChessboardResource(database_url=db_url)},
        run_config={"ops": {OP_NAME: {"config": config}}},
        raise_on_error=False,
    )


def _status(result: dg.ExecuteInProcessResult) -> dict:
    [materialization] = [
        e.event_specific_data.materialization
        for e in result.all_events
        if e.event_type_value == "ASSET_MATERIALIZATION"
    ]
    assert materialization.asset_key == STATUS_ASSET
    return {k: v.value for k, v in materialization.metadata.items()}


def _talent_id(engine, project_id) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                sa.text("SELECT external_talent_id FROM chessboard.projects WHERE id = :p"), {"p": project_id}
            ).scalar_one()
        )


def test_force_recalc_by_name_talent_id_or_pin_id_enqueues_a_due_row(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        one = standard_project(b, name="ЖК Северный")
        two = standard_project(b, name="Other")
    with dg.DagsterInstance.ephemeral() as instance:
        by_name = _run(db_url, instance, step="FORCE_RECALC", project="жк северный")
        assert by_name.success
        with engine.connect() as conn:
            assert set(queue(conn)) == {one.id}
        by_talent = _run(db_url, instance, step="FORCE_RECALC", project=_talent_id(engine, two.id))
        by_pin = _run(db_url, instance, step="FORCE_RECALC", project=str(two.id), due_now=False)
    assert by_talent.success and by_pin.success
    with engine.connect() as conn:
        rows = queue(conn)
        now = conn.execute(sa.text("SELECT now()")).scalar_one()
    assert set(rows) == {one.id, two.id}
    assert rows[one.id]["due_at"] <= now
    assert rows[two.id]["requested_count"] == 2
    [step] = [e for e in by_name.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    assert step.event_specific_data.metadata["project_id"].value == str(one.id)
    status = _status(by_pin)
    assert status["queue_depth"] == 2 and status["poison"] == 0 and status["held"] == 0
    assert status["due"] == 1  # the debounced request is not due yet
    # the oldest rows, due or not: the debounced one waits, with its DueAt
    due, waiting = [record.data for record in status["oldest_rows"].records]
    assert (due["project"], due["project_id"], due["state"]) == ("ЖК Северный", str(one.id), "due")
    assert (waiting["project_id"], waiting["state"]) == (str(two.id), "waiting")
    assert waiting["due_at"] == rows[two.id]["due_at"].isoformat(timespec="seconds")


def test_an_unknown_or_ambiguous_project_fails_the_run_in_one_line(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        standard_project(b, name="Twin")
        standard_project(b, name="Twin")
    with dg.DagsterInstance.ephemeral() as instance:
        unknown = _run(db_url, instance, step="FORCE_RECALC", project="Nowhere")
        twins = _run(db_url, instance, step="FORCE_RECALC", project="twin")
        missing = _run(db_url, instance, step="RESET_POISON")
    for result, text in (
        (unknown, "no project has this Talent id, PIN id or name"),
        (twins, "is ambiguous, give its Talent id or PIN id"),
        (missing, "RESET_POISON needs a project"),
    ):
        assert not result.success
        [failure] = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
        description = failure.step_failure_data.user_failure_data.description
        assert text in description and "\n" not in description
    with engine.connect() as conn:
        assert queue(conn) == {}


def test_reset_poison_with_nothing_queued_is_a_success_saying_so(db_url, engine):
    with engine.begin() as conn:
        project = standard_project(StoreBuilder(conn), name="Quiet")
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(db_url, instance, step="RESET_POISON", project="quiet")
        assert result.success
        lines = [
            e.message
            for e in instance.all_logs(result.run_id)
            if e.user_message and "RESET_POISON" in e.user_message
        ]
    assert lines == ["RESET_POISON: nothing to reset, project 'quiet' has no recalc request"]
    assert str(project.id) not in lines[0]
    [output] = [e for e in result.all_node_events if e.event_type_value == "STEP_OUTPUT"]
    assert output.event_specific_data.metadata["reset"].value is False
    with engine.connect() as conn:
        assert queue(conn) == {}


def test_reset_poison_of_a_row_that_is_not_poison_is_a_success_changing_nothing(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b, name="Waiting")
        b.request(project, attempt_count=2)
        before = queue(conn)
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(db_url, instance, step="RESET_POISON", project="waiting")
        assert result.success
        lines = [
            e.message
            for e in instance.all_logs(result.run_id)
            if e.user_message and "RESET_POISON" in e.user_message
        ]
        errors = [e for e in instance.all_logs(result.run_id) if e.level >= logging.ERROR]
    assert lines == [
        "RESET_POISON: nothing to reset, the recalc request of project 'waiting' is not poison "
        "(AttemptCount 2 of 5); FORCE_RECALC makes it due now"
    ]
    assert str(project.id) not in lines[0] and errors == []
    with engine.connect() as conn:
        assert queue(conn) == before  # its AttemptCount and DueAt as they were


def test_reset_poison_makes_a_poison_row_due_and_the_status_shows_it_until_then(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b, name="Poisoned")
        b.request(project, attempt_count=5)
        conn.execute(sa.text("UPDATE chessboard.project_recalc_requests SET last_error = 'boom'"))
    with dg.DagsterInstance.ephemeral() as instance:
        before = _status(_run(db_url, instance, step="STATUS"))
        reset = _run(db_url, instance, step="RESET_POISON", project="Poisoned")
    [poison] = [record.data for record in before["oldest_rows"].records]
    assert before["poison"] == 1
    assert (poison["project"], poison["state"], poison["attempts"], poison["last_error"]) == (
        "Poisoned",
        "poison",
        5,
        "boom",
    )
    assert reset.success
    with engine.connect() as conn:
        [row] = queue(conn).values()
    assert row["attempt_count"] == 0
    after = _status(reset)
    assert after["poison"] == 0 and after["due"] == 1


def test_audit_fails_on_drift_and_passes_once_the_forced_recalc_is_drained(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b, name="Drifted")
        b.request(project)
    drain(engine, batch_size=50, poison_attempts=5)
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE chessboard.projects SET property_objects_free_count = 99 WHERE id = :p"),
            {"p": project.id},
        )
    with dg.DagsterInstance.ephemeral() as instance:
        drifted = _run(db_url, instance, step="AUDIT")
        scoped = _run(db_url, instance, step="AUDIT", project="Drifted")
        _run(db_url, instance, step="FORCE_RECALC", project="Drifted")
        drain(engine, batch_size=50, poison_attempts=5)
        clean = _run(db_url, instance, step="AUDIT")
    assert not drifted.success and not scoped.success
    [failure] = [e for e in drifted.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_failure_data.user_failure_data.metadata["divergences"].value >= 1
    assert clean.success
    assert _status(drifted)["queue_depth"] == 0  # the status is recorded on a failed step too


def test_the_queue_sensor_records_the_status_when_it_changed_with_rows_not_yet_due(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b, name="Waiting")
        b.request(project, due_in_seconds=120)  # queued, not due: the debounce
    resources = {"chessboard": ChessboardResource(database_url=db_url)}
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources=resources)
        first = recalc_queue_sensor(context)
        context.update_cursor(first.cursor)
        unchanged = recalc_queue_sensor(context)
        with engine.begin() as conn:
            more = StoreBuilder(conn)
            more.request(standard_project(more, name="Due now"))
        changed = recalc_queue_sensor(context)
    assert isinstance(first, dg.SensorResult) and not first.run_requests
    [materialization] = first.asset_events
    assert materialization.asset_key == STATUS_ASSET
    status = {k: v.value for k, v in materialization.metadata.items()}
    assert status["queue_depth"] == 1 and status["due"] == 0
    [row] = [record.data for record in status["oldest_rows"].records]
    with engine.connect() as conn:
        due_at = queue(conn)[project.id]["due_at"]
    assert (row["project"], row["state"], row["due_at"]) == (
        "Waiting",
        "waiting",
        due_at.isoformat(timespec="seconds"),
    )
    assert isinstance(unchanged, dg.SkipReason) and "unchanged" in unchanged.skip_message
    assert isinstance(changed, dg.SensorResult) and changed.cursor != first.cursor
    [again] = changed.asset_events
    assert [r.data["state"] for r in again.metadata["oldest_rows"].value.records] == ["due", "waiting"]

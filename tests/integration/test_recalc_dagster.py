"""The Dagster shell of the recalc: sensor decisions, the drain job, the asset checks."""

from __future__ import annotations

import json
import re
import signal
import threading
import time

import dagster as dg
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.recalc.checks import AGGREGATES, AUDIT_CHECK, AUDIT_JOB_NAME, POISON_CHECK
from pin_chessboard_pipelines.defs.recalc.definitions import (
    DRAIN_TAG,
    JOB_NAME,
    UNTIL_TAG,
    definitions,
    drain_run_config,
    project_aggregates_recalc_sensor,
    recalc_job,
    until_of,
)
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.stopper import StopReason
from tests.support.recalc_data import StoreBuilder, outbox, queue, standard_project


def _resources(db_url: str) -> dict:
    return {"chessboard": ChessboardResource(database_url=db_url)}


def _sensor(db_url: str, instance: dg.DagsterInstance):
    context = dg.build_sensor_context(instance=instance, resources=_resources(db_url))
    return project_aggregates_recalc_sensor(context), context


def test_sensor_skips_when_nothing_is_due(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b), due_in_seconds=60)  # queued, not due
    with dg.DagsterInstance.ephemeral() as instance:
        result, context = _sensor(db_url, instance)
    assert isinstance(result, dg.SkipReason)
    assert re.fullmatch(
        r"the next recalc row is due in (5\d|60)s; a drain run starts 30s ahead", result.skip_message
    )
    assert context.cursor is None


def test_sensor_requests_one_drain_run_for_the_time_slot_when_rows_are_due(db_url, engine, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_RECALC_DRAIN_LIFETIME_SECONDS", "300")
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        for _ in range(3):
            b.request(standard_project(b))
    with dg.DagsterInstance.ephemeral() as instance:
        result, _ = _sensor(db_url, instance)
    assert isinstance(result, dg.SensorResult)
    (request,) = result.run_requests
    until = until_of(request.tags[UNTIL_TAG])
    assert request.tags[UNTIL_TAG].endswith("+00:00")  # readable in the UI: ISO-8601 UTC
    assert until % 300 == 0 and time.time() < until <= time.time() + 300 + 30
    assert request.run_key == f"recalc-drain:{int(until // 300) - 1}"
    assert request.tags[DRAIN_TAG] == "recalc-drain"
    assert request.run_config["ops"]["drain_0"]["config"]["poll_until"] == until
    assert json.loads(result.cursor) == {"slot": int(until // 300) - 1, "attempt": 0}


def test_sensor_waits_while_a_drain_run_is_queued_or_running(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b))
    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=_resources(db_url)))
    job = defs.resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.ephemeral() as instance:
        run = instance.create_run_for_job(
            job_def=job,
            status=dg.DagsterRunStatus.STARTED,
            tags={DRAIN_TAG: "recalc-drain", UNTIL_TAG: str(time.time() + 120)},
        )
        waiting, context = _sensor(db_url, instance)
        instance.report_run_canceled(run)
        again, _ = _sensor(db_url, instance)
    assert isinstance(waiting, dg.SkipReason) and run.run_id in waiting.skip_message
    assert isinstance(again, dg.SensorResult) and len(again.run_requests) == 1


def test_poison_rows_do_not_trigger_runs(db_url, engine, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_RECALC_POISON_ATTEMPTS", "2")
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b), attempt_count=2)
    with dg.DagsterInstance.ephemeral() as instance:
        result, _ = _sensor(db_url, instance)
    assert isinstance(result, dg.SkipReason)


def _run(db_url: str, instance: dg.DagsterInstance, **config) -> dg.ExecuteInProcessResult:
    return recalc_job().execute_in_process(
        instance=instance,
        resources=_resources(db_url),
        run_config=drain_run_config(1, config) if config else None,
        raise_on_error=False,
    )


def test_drain_job_recalculates_and_reports_metadata(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b) for _ in range(3)]
        for p in projects:
            b.request(p)
        archived = standard_project(b, status="Archived")
        b.request(archived)
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(db_url, instance)
        assert result.success
        (output,) = [e for e in result.events_for_node("drain_0") if e.is_successful_output]
        metadata = {k: v.value for k, v in output.step_output_data.metadata.items()}
        aggregates = [
            e
            for e in result.all_events
            if e.event_type_value == "ASSET_MATERIALIZATION"
            and e.asset_key == dg.AssetKey("chessboard_aggregates")
        ]
        checks = result.get_asset_check_evaluations()
        order = [
            "materialization"
            if e.event_type_value == "ASSET_MATERIALIZATION"
            else e.event_specific_data.check_name
            for e in result.all_events
            if e.event_type_value in ("ASSET_MATERIALIZATION", "ASSET_CHECK_EVALUATION")
        ]
    assert metadata["projects_recalculated"] == 3
    assert metadata["projects_skipped_archived"] == 1
    assert metadata["republished_project"] == 3
    assert metadata["projects_per_second"] > 0
    assert len(aggregates) == 1  # every drain that recalculated is a materialization (status, history)
    assert aggregates[0].event_specific_data.materialization.metadata["projects_recalculated"].value == 3
    # the audit check is evaluated with the materialization, after it, in its run
    assert [(c.check_name, c.passed) for c in checks] == [(POISON_CHECK, True), (AUDIT_CHECK, True)]
    assert order.index("materialization") < order.index(AUDIT_CHECK)
    assert checks[1].metadata["divergences"].value == 0
    with engine.connect() as conn:
        assert queue(conn) == {}
        messages = outbox(conn)
    assert {m["headers"]["correlationId"] for m in messages} == {result.run_id}


def test_drain_job_reports_poison_as_a_failed_check(db_url, engine, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_RECALC_POISON_ATTEMPTS", "1")
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        bad = standard_project(b)
        b.request(bad)
        conn.execute(
            sa.text(
                "ALTER TABLE chessboard.layouts ADD CONSTRAINT test_no_counts CHECK (property_objects_count = 0)"
            )
        )
    with dg.DagsterInstance.ephemeral() as instance:
        result = _run(db_url, instance)
        (evaluation,) = [c for c in result.get_asset_check_evaluations() if c.check_name == POISON_CHECK]
        messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any(m.startswith("project_recalc_failed") and "AttemptCount=1" in m for m in messages)
    assert any(m.startswith("CHESSBOARD_RECALC_POISON") and str(bad.id) in m for m in messages)
    assert result.success  # a failed project does not fail the run
    assert evaluation.check_name == POISON_CHECK and not evaluation.passed
    assert "CHESSBOARD_RECALC_POISON" in evaluation.description
    assert evaluation.metadata["poison_rows"].value == 1
    with engine.connect() as conn:
        assert queue(conn)[bad.id]["attempt_count"] == 1


def test_audit_checks_show_drift_in_the_ui(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project)
    drain(engine)
    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=_resources(db_url)))
    audit_job = defs.resolve_job_def(AUDIT_JOB_NAME)
    with dg.DagsterInstance.ephemeral() as instance:
        clean = {
            c.check_name: c
            for c in audit_job.execute_in_process(instance=instance).get_asset_check_evaluations()
        }
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE chessboard.projects SET property_objects_free_count = 99 WHERE id = :p"),
                {"p": project.id},
            )
        drift = {
            c.check_name: c
            for c in audit_job.execute_in_process(instance=instance).get_asset_check_evaluations()
        }
    assert clean[AUDIT_CHECK].passed and clean[POISON_CHECK].passed
    assert clean[AUDIT_CHECK].asset_key == AGGREGATES.key
    assert not drift[AUDIT_CHECK].passed
    assert drift[AUDIT_CHECK].metadata["divergences"].value == 1
    (sample,) = drift[AUDIT_CHECK].metadata["sample"].value
    assert sample["field"] == "property_objects_free_count" and sample["stored"] == "99"


def test_run_termination_stops_between_batches(db_url, engine, monkeypatch):
    """SIGINT (what run termination delivers) during a drain: the current batch (one transaction)
    finishes or rolls back whole, the rest stays queued, the run ends as interrupted."""
    monkeypatch.setenv("CHESSBOARD_RECALC_BATCH_SIZE", "2")
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b) for _ in range(5)]
        for p in projects:
            b.request(p)
        conn.execute(
            sa.text(
                "CREATE FUNCTION chessboard.test_slow() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_sleep(0.2); RETURN NEW; END $$"
            )
        )
        conn.execute(
            sa.text(
                "CREATE TRIGGER test_slow BEFORE UPDATE ON chessboard.projects "
                "FOR EACH ROW EXECUTE FUNCTION chessboard.test_slow()"
            )
        )

    def interrupt_after_first_commit():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if len(queue(conn)) < len(projects):
                    break
            time.sleep(0.01)
        signal.raise_signal(signal.SIGINT)

    with dg.DagsterInstance.ephemeral() as instance:
        killer = threading.Thread(target=interrupt_after_first_commit)
        killer.start()
        result = _run(db_url, instance)
        killer.join()
    assert not result.success
    with engine.connect() as conn:
        remaining = queue(conn)
        totals = {
            r["id"]: r["property_objects_total_count"]
            for r in conn.execute(
                sa.text("SELECT id, property_objects_total_count FROM chessboard.projects")
            ).mappings()
        }
    assert 1 <= len(remaining) <= len(projects) - 1
    for p in projects:
        assert (totals[p.id] == 6) == (p.id not in remaining)


def test_sensor_starts_the_successor_ahead_of_the_live_runs_end(db_url, engine, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_RECALC_DRAIN_LEAD_SECONDS", "30")
    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=_resources(db_url)))
    job = defs.resolve_job_def(JOB_NAME)
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b), due_in_seconds=5)  # the live run drains this one
    with dg.DagsterInstance.ephemeral() as instance:
        instance.create_run_for_job(
            job_def=job,
            status=dg.DagsterRunStatus.STARTED,
            tags={DRAIN_TAG: "recalc-drain", UNTIL_TAG: str(time.time() + 10)},
        )
        covered, _ = _sensor(db_url, instance)
        with engine.begin() as conn:
            b = StoreBuilder(conn)
            b.request(standard_project(b), due_in_seconds=20)  # due after the live run's end
        successor, _ = _sensor(db_url, instance)
    assert isinstance(covered, dg.SkipReason) and "no row due after that" in covered.skip_message
    assert isinstance(successor, dg.SensorResult) and len(successor.run_requests) == 1


def test_sensor_replaces_a_run_that_ended_early_in_its_slot(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b))
    with dg.DagsterInstance.ephemeral() as instance:
        first, _ = _sensor(db_url, instance)
        slot = json.loads(first.cursor)["slot"]
        context = dg.build_sensor_context(
            instance=instance, resources=_resources(db_url), cursor=first.cursor
        )
        second = project_aggregates_recalc_sensor(context)
    (request,) = second.run_requests
    assert request.run_key == f"recalc-drain:{slot}.1"
    assert json.loads(second.cursor) == {"slot": slot, "attempt": 1}


def test_long_lived_drain_takes_rows_as_they_fall_due_until_its_slot_ends(db_url, engine):
    """Each row is requested only once the drain took the one before, due 0.3 s later: the same run
    takes it in a pass of its own, never before its DueAt, and stops when its slot ends. The slot
    ends (the run's clock jumps to it) once the third row is taken, whatever the machine's speed;
    how soon after DueAt a row is taken is a figure of benchmarks/recalc_lag_daemon.py."""
    from pin_chessboard_pipelines.recalc.drain_slot import drain_until

    due_in = 0.3
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b) for _ in range(3)]
        b.request(projects[0], due_in_seconds=due_in)
    lags: list[float] = []
    slot_over = threading.Event()
    ends_at = time.time() + 600  # a generous deadline; the slot ends with the third row

    def after_pass(result) -> None:
        lags.extend(result.lags)
        if len(lags) < len(projects):
            with engine.begin() as conn:
                StoreBuilder(conn).request(projects[len(lags)], due_in_seconds=due_in)
        else:
            slot_over.set()

    def clock() -> float:
        return ends_at if slot_over.is_set() else time.time()

    result = drain_until(engine, ends_at=ends_at, poll_seconds=0.5, after_pass=after_pass, clock=clock)
    assert result.recalculated == 3 and result.stopped is StopReason.LIFETIME and result.passes == 3
    with engine.connect() as conn:
        assert queue(conn) == {}
    # first request -> commit: none was taken before its DueAt
    assert len(lags) == 3 and min(lags) >= due_in - 0.01


def test_a_drain_run_that_starts_after_its_slot_still_drains_what_is_due(db_url, engine):
    from pin_chessboard_pipelines.recalc.drain_slot import drain_until

    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b))
    result = drain_until(engine, ends_at=time.time() - 5, poll_seconds=0.5)
    assert result.recalculated == 1 and result.stopped is StopReason.LIFETIME
    with engine.connect() as conn:
        assert queue(conn) == {}

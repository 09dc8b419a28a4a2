"""The import through Dagster: partitions, one run over a range, resume by re-execution, sensors."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import uuid

import dagster as dg
import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.executors import build_executor
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import import config as talent_config
from pin_chessboard_pipelines.defs.talent_import import session as talent_session
from pin_chessboard_pipelines.defs.talent_import.definitions import definitions
from pin_chessboard_pipelines.defs.talent_import.partitions import developer_id_of, partition_key, slug
from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import import runner, runs
from pin_chessboard_pipelines.talent_import.lock import ImportLock
from tests.support.import_runs import insert_import_run

SPEC = DatasetSpec(developers=3, projects_per_developer=2, objects_per_project=6)
PARTITION = talent_config.TALENT_DEVELOPERS.name


def _resources() -> dict:
    """A fresh resource: it caches the settings and the store URL of the test's environment."""
    return {"chessboard": ChessboardResource()}


def build_defs() -> dg.Definitions:
    return dg.Definitions.merge(
        definitions(),
        # the deployment's in_process executor (defs/executors.py: the run worker's heartbeat, the
        # refusal of a re-execution with nothing to resume)
        dg.Definitions(resources={"chessboard": ChessboardResource()}, executor=build_executor("in_process")),
    )


def import_job() -> dg.JobDefinition:
    """Reconstructable (execute_job / re-execution): the store comes from CHESSBOARD_DATABASE_URL."""
    return build_defs().resolve_job_def(talent_config.IMPORT_JOB)


@pytest.fixture
def env(monkeypatch, db_url, talent_sim):
    sim = talent_sim(SPEC)
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    monkeypatch.setenv("TALENT_API_URL", sim.url)
    monkeypatch.setenv("CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS", "0.2")
    return sim


def _developers() -> list[str]:
    return [dataset.entity_id(SPEC, "developers", i) for i in range(SPEC.developers)]


def _range_tags(keys: list[str]) -> dict[str, str]:
    return {"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]}


def _config(**values) -> dict:
    return {"resources": {"talent_import": {"config": {"page_size": 4, **values}}}}


def _runs(engine) -> list[dict]:
    with engine.connect() as conn:
        return [
            dict(r) for r in conn.execute(sa.text("SELECT * FROM chessboard.talent_import_runs")).mappings()
        ]


def _page_states(engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT status, count(*) FROM chessboard.talent_import_pages"
                " WHERE stage = 'PropertyObjects' GROUP BY status"
            )
        )
        return dict(rows.all())


def _materializations(result: dg.ExecuteInProcessResult | dg.ExecutionResult, key: str) -> list:
    return [
        e.event_specific_data.materialization
        for e in result.all_events
        if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == dg.AssetKey(key)
    ]


@pytest.mark.slow
def test_one_run_over_all_partitions_is_one_unfiltered_import(env, engine, db_url):
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        result = import_job().execute_in_process(
            instance=instance, run_config=_config(workers=3), tags=_range_tags(_developers())
        )
        assert result.success
        [run] = _runs(engine)
        assert run["status"] == "Completed"
        assert run["correlation_id"] == result.run_id == run["dagster_run_id"]
        assert run["scopes"] == [""]  # all partitions: listed without a developer filter
        materialized = _materializations(result, "property_objects")
        assert sorted(m.partition for m in materialized) == sorted(_developers())
        per_developer = SPEC.projects_per_developer * SPEC.objects_per_project
        for m in materialized:  # each partition: its own developer's figures, then the import's
            assert m.metadata["developer_id"].value == m.partition
            assert m.metadata["planned"].value == m.metadata["applied"].value == per_developer
            assert m.metadata["import_planned"].value == dataset.count(SPEC, "property-objects")
        metadata = materialized[0].metadata
        assert metadata["import_applied"].value == metadata["import_planned"].value
        assert metadata["import_run_id"].value == str(run["id"])
        assert metadata["import_status"].value == "Completed"
        assert metadata["run_items_processed"].value == dataset.count(SPEC, "property-objects")
        assert metadata["run_items_per_second"].value > 0
        checks = [
            e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"
        ]
        # a quarantine check per stage and import_not_stuck: every check of the stages evaluated
        assert len(checks) == len(ENTITIES) + 1 and all(c.passed for c in checks)
        assert "import_not_stuck" in {c.check_name for c in checks}
    with ImportLock(db_url) as lock:  # released with the last stage
        lock.acquire(timeout=0)


@pytest.mark.slow
def test_a_run_lists_only_the_steps_it_ran(env, engine):
    """Per stage: its plan, one page step per process of the run, its barrier; none skipped, so the
    run's page shows no "Not executed" step."""
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        result = import_job().execute_in_process(
            instance=instance, run_config=_config(processes=2, workers=1), tags=_range_tags(_developers())
        )
        assert result.success
        records = instance.all_logs(result.run_id)
    steps = {r.step_key for r in records if r.step_key}
    started = {r.step_key for r in records if r.dagster_event and r.dagster_event.is_step_start}
    skipped = {r.step_key for r in records if r.dagster_event and r.dagster_event.is_step_skipped}
    assert not skipped and steps == started
    for stage in ENTITIES:
        name = talent_config.asset_name(stage)
        assert {s for s in steps if s.startswith(f"{name}.")} == {
            f"{name}.{name}_plan",
            f"{name}.{name}_pages[0]",
            f"{name}.{name}_pages[1]",
            f"{name}.{name}_barrier",
        }
    assert len(steps) == 4 * len(ENTITIES) + 1  # and the import_not_stuck check
    [run] = _runs(engine)
    assert run["status"] == "Completed"


@pytest.mark.slow
def _field(line: str, name: str) -> str:
    return line.split(f" {name}=", 1)[1].split(" ", 1)[0].strip("'\"")


def test_one_partition_resyncs_one_developer(env, engine, caplog):
    developer = _developers()[1]
    caplog.set_level("INFO", logger="pin_chessboard_pipelines.talent_import")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        result = import_job().execute_in_process(
            instance=instance, run_config=_config(), partition_key=developer
        )
        assert result.success
        [materialized] = _materializations(result, "property_objects")
        # the partition's own figures first, the import run's after
        assert list(materialized.metadata)[:6] == [
            "developer_id",
            "developer_name",
            "planned",
            "applied",
            "skipped",
            "failed",
        ]
        # the same scope again: its stages have the first run's totals for an ETA while walking
        again = import_job().execute_in_process(
            instance=instance, run_config=_config(), partition_key=developer
        )
        assert again.success
    name = dataset.item(SPEC, "developers", 1)["name"]
    applied = [r.getMessage() for r in caplog.records if r.getMessage().startswith("page-applied")]
    # every page of a developer's partition names the developer (the Developers stage's page too:
    # its name is in the replica once the page committed)
    assert applied and all(f"Scope={developer} Developer={name!r}" in line for line in applied)
    # each stage's barrier step reports the stage's wall time over its pages, not its own moment
    completed = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stage-completed")]
    assert len(completed) == 2 * len(ENTITIES)
    objects = [line for line in completed if "Stage=PropertyObjects" in line]
    assert objects and all(
        float(_field(line, "DurationSeconds")) > 0 and float(_field(line, "ItemsPerSecond")) > 0
        for line in objects
    ), objects
    first, second = sorted(_runs(engine), key=lambda r: r["started_at"])
    with engine.connect() as conn:
        assert runs.previous_stage_planned(conn, second["id"], "PropertyObjects") == (
            SPEC.projects_per_developer * SPEC.objects_per_project
        )
        assert runs.previous_stage_planned(conn, first["id"], "PropertyObjects") is None
    run = first
    assert run["scopes"] == [developer] and str(run["developer_id_filter"]) == developer
    with engine.connect() as conn:
        developers = (
            conn.execute(sa.text("SELECT external_talent_id::text FROM chessboard.developers"))
            .scalars()
            .all()
        )
        objects = conn.execute(sa.text("SELECT count(*) FROM chessboard.property_objects")).scalar()
    assert developers == [developer]
    assert objects == SPEC.projects_per_developer * SPEC.objects_per_project


@pytest.fixture
def failing(monkeypatch) -> dict[str, bool]:
    """The PropertyObjects apply fails while `failing["on"]` (as a store gone away would)."""
    failing = {"on": True}
    real_apply = runner.apply_snapshots

    def apply(conn, entity, items, ctx):
        if failing["on"] and entity == "propertyObject":
            raise RuntimeError("the store went away")
        return real_apply(conn, entity, items, ctx)

    monkeypatch.setattr(runner, "apply_snapshots", apply)
    return failing


def _refused(instance: dg.DagsterInstance, result: dg.ExecuteJobResult) -> str:
    """The refusal of a run its executor refused: the run Success, no step started, the line as the
    run's tag pin/refused and as the run's one warning."""
    assert result.success
    assert not [e for e in result.all_events if e.step_key], [e.event_type_value for e in result.all_events]
    run = instance.get_run_by_id(result.run_id)
    assert run is not None
    line = run.tags[talent_config.REFUSED_TAG]
    warnings = [
        r.user_message
        for r in instance.all_logs(result.run_id)
        if r.dagster_event is None and r.level >= logging.WARNING
    ]
    assert warnings == [line]
    return line


def _partition_statuses(instance: dg.DagsterInstance) -> set:
    """The statuses the asset's Partitions tab shows for property_objects' partitions."""
    keys = list(instance.get_dynamic_partitions(PARTITION))
    statuses = instance.get_status_by_partition(
        dg.AssetKey("property_objects"), keys, talent_config.TALENT_DEVELOPERS
    )
    return set((statuses or {}).values())


@pytest.mark.slow
def test_re_execute_from_failure_resumes_the_same_import_run(env, engine, monkeypatch, failing):
    monkeypatch.setenv("CHESSBOARD_IMPORT_PAGE_SIZE", "4")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        job = dg.reconstructable(import_job)
        first = dg.execute_job(job, instance, tags=_range_tags(_developers()))
        assert not first.success
        [run] = _runs(engine)
        assert run["status"] == "Failed" and "the store went away" in run["error"]
        with engine.connect() as conn:
            layouts = conn.execute(sa.text("SELECT count(*) FROM chessboard.layouts")).scalar()
        failing["on"] = False
        second = dg.execute_job(  # the UI copies the parent's tags (the partition range) the same way
            job,
            instance,
            tags=_range_tags(_developers()),
            reexecution_options=dg.ReexecutionOptions.from_failure(first.run_id, instance),
        )
        assert second.success
        # only the failed stage's steps ran again (its page step and barrier), resuming the same import
        # run, and the check downstream of it
        assert {e.step_key for e in second.all_events if e.event_type_value == "STEP_SUCCESS"} == {
            "property_objects.property_objects_pages[0]",
            "property_objects.property_objects_barrier",
            "property_objects_import_not_stuck",
        }
        # a second "Re-execute from failure" of the same run: refused in one line, no new import
        third = dg.execute_job(
            job,
            instance,
            tags=_range_tags(_developers()),
            reexecution_options=dg.ReexecutionOptions.from_failure(first.run_id, instance),
        )
        # refused before any step starts: Success with the line as its tag and one warning, no
        # step, and the import's partitions keep their status (a failed run would mark them Failed)
        refusal = _refused(instance, third)
        assert refusal.startswith("CHESSBOARD_IMPORT_INVALID_REQUEST: nothing to resume: import run")
        assert f"import run {run['id']} (correlation id {first.run_id}) Completed" in refusal
        assert _partition_statuses(instance) == {dg.AssetPartitionStatus.MATERIALIZED}
    [resumed] = _runs(engine)
    assert resumed["id"] == run["id"] and resumed["status"] == "Completed"
    assert resumed["correlation_id"] == first.run_id and resumed["dagster_run_id"] == second.run_id
    assert resumed["stage_counters"]["Layouts"]["applied"] == layouts  # earlier stages kept, not re-run
    assert resumed["stage_counters"]["PropertyObjects"]["applied"] == dataset.count(SPEC, "property-objects")


@pytest.mark.slow
def test_a_re_executed_backfill_resumes_its_import_and_a_second_one_is_refused(
    env, engine, monkeypatch, failing
):
    partitions = _range_tags(_developers())
    # the tags the backfill daemon gives the runs of a backfill and of its re-executions
    backfill = {"dagster/backfill": "first"}
    again = {
        "dagster/backfill": "again",
        "dagster/parent_backfill_id": "first",
        "dagster/root_backfill_id": "first",
    }
    third = {
        "dagster/backfill": "third",
        "dagster/parent_backfill_id": "first",
        "dagster/root_backfill_id": "first",
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        job = dg.reconstructable(import_job)
        first = dg.execute_job(job, instance, tags={**partitions, **backfill})
        assert not first.success
        [run] = _runs(engine)
        failing["on"] = False
        resumed_by = dg.execute_job(job, instance, tags={**partitions, **again})
        assert resumed_by.success
        [resumed] = _runs(engine)
        assert resumed["id"] == run["id"] and resumed["status"] == "Completed"
        assert resumed["correlation_id"] == first.run_id == run["correlation_id"]
        refused = dg.execute_job(job, instance, tags={**partitions, **third})
        line = _refused(instance, refused)
        assert f"nothing to resume: import run {run['id']} (correlation id {first.run_id}) Completed" in line
        assert _partition_statuses(instance) == {dg.AssetPartitionStatus.MATERIALIZED}
    assert [r["id"] for r in _runs(engine)] == [run["id"]]  # no new import was started


def test_a_held_lock_fails_the_run_with_the_error_code(env, engine, db_url):
    with ImportLock(db_url) as other, dg.instance_for_test() as instance:
        other.acquire(timeout=0)
        instance.add_dynamic_partitions(PARTITION, _developers())
        result = import_job().execute_in_process(
            instance=instance, run_config=_config(), tags=_range_tags(_developers()), raise_on_error=False
        )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "CHESSBOARD_IMPORT_LOCK_HELD" in failure.event_specific_data.error.message
    assert _runs(engine) == []


def _failure_line(result: dg.ExecuteInProcessResult) -> str:
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    return failure.event_specific_data.user_failure_data.description


@pytest.mark.slow
def test_a_project_filter_with_another_developers_partition_is_refused(env, engine):
    """The filters are mutually exclusive: a project re-sync runs on its own developer's partition
    alone; on another one (or on several) the run is refused with one line and writes nothing."""
    owner = dataset.project_owner(SPEC, 0)
    project = dataset.entity_id(SPEC, "projects", 0)
    other = next(d for i, d in enumerate(_developers()) if i != owner)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        wrong = import_job().execute_in_process(
            instance=instance,
            run_config=_config(project_id_filter=project),
            partition_key=other,
            raise_on_error=False,
        )
        several = import_job().execute_in_process(
            instance=instance,
            run_config=_config(project_id_filter=project),
            tags=_range_tags(_developers()),
            raise_on_error=False,
        )
        assert not wrong.success and not several.success
        line = _failure_line(wrong)
        assert line.startswith("CHESSBOARD_IMPORT_INVALID_REQUEST: ") and "\n" not in line
        assert "mutually exclusive" in line and f"belongs to developer {_developers()[owner]}" in line
        assert "selects 3 partitions" in _failure_line(several)
        assert _runs(engine) == [] and not _materializations(wrong, "developers")
        right = import_job().execute_in_process(
            instance=instance,
            run_config=_config(project_id_filter=project),
            partition_key=_developers()[owner],
        )
        assert right.success
        [materialized] = _materializations(right, "property_objects")
        assert materialized.partition == _developers()[owner]
    [run] = _runs(engine)
    assert run["scopes"] == [f"project:{project}"] and run["status"] == "Completed"


def test_the_discovery_sensor_and_job_add_developer_partitions(env):
    defs = build_defs()
    sensor = defs.resolve_sensor_def("talent_developers_sensor")
    # a key is the developer's name made safe, then its Talent id
    names = [dataset.item(SPEC, "developers", i)["name"] for i in range(SPEC.developers)]
    keys = [partition_key(d, name) for d, name in zip(_developers(), names, strict=True)]
    assert keys[0] == f"gk-{slug(names[0].split(' ', 1)[1])}-{_developers()[0]}"
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, keys[:1])
        result = sensor(dg.build_sensor_context(instance=instance, resources=_resources()))
        [request] = result.dynamic_partitions_requests
        assert request.partitions_def_name == PARTITION
        assert list(request.partition_keys) == keys[1:]
        assert defs.resolve_job_def(talent_config.DISCOVERY_JOB).execute_in_process(instance=instance).success
        assert sorted(instance.get_dynamic_partitions(PARTITION)) == sorted(keys)
        assert [developer_id_of(key) for key in keys] == _developers()
        again = sensor(dg.build_sensor_context(instance=instance, resources=_resources()))
        assert isinstance(again, dg.SkipReason) and "none new" in again.skip_message


@pytest.mark.slow
def test_a_developer_renamed_twice_keeps_one_partition_with_its_whole_history(env, engine):
    """The key is frozen at first sight: Talent's renames add no partition (discovery job, sensor),
    every re-sync materializes the same one, and its metadata names the developer as it is now."""
    defs = build_defs()
    sensor = defs.resolve_sensor_def("talent_developers_sensor")
    discovery = defs.resolve_job_def(talent_config.DISCOVERY_JOB)
    developer = _developers()[0]
    names = []
    with dg.instance_for_test() as instance:
        for renames in range(3):
            spec = dataclasses.replace(SPEC, developer_renames=renames, version=1 + renames)
            env.set_spec(spec)
            names.append(dataset.item(spec, "developers", 0)["name"])
            assert discovery.execute_in_process(instance=instance).success
            again = sensor(dg.build_sensor_context(instance=instance, resources=_resources()))
            assert isinstance(again, dg.SkipReason) and "none new" in again.skip_message
            [key] = [k for k in instance.get_dynamic_partitions(PARTITION) if developer_id_of(k) == developer]
            result = import_job().execute_in_process(
                instance=instance, run_config=_config(), partition_key=key
            )
            assert result.success
        assert len(set(names)) == 3  # renamed twice
        assert len(instance.get_dynamic_partitions(PARTITION)) == SPEC.developers
        assert key == partition_key(developer, names[0])  # the name it was first seen with
        history = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("developers"), asset_partitions=[key]), limit=10
        ).records
    current = [r.asset_materialization.metadata["developer_name"].value for r in reversed(history)]
    assert current == names  # one partition, every re-sync, each with the name of its day
    with engine.connect() as conn:
        [row] = conn.execute(
            sa.text(
                "SELECT partition_key, name FROM chessboard.developer_partitions WHERE developer_id = :id"
            ),
            {"id": developer},
        ).all()
    assert tuple(row) == (key, names[-1])


def test_the_discovery_sensor_skips_while_talent_is_down(env):
    env.available = False
    sensor = build_defs().resolve_sensor_def("talent_developers_sensor")
    with dg.instance_for_test() as instance:
        result = sensor(dg.build_sensor_context(instance=instance, resources=_resources()))
    assert isinstance(result, dg.SkipReason) and "503" in result.skip_message


def test_the_stuck_sensor_reports_a_running_import_without_progress(env, engine):
    run_id = insert_import_run(engine, started_at=dt.datetime.now(dt.UTC) - dt.timedelta(minutes=20))
    sensor = build_defs().resolve_sensor_def("talent_import_stuck_sensor")
    with dg.instance_for_test() as instance:
        first = sensor(dg.build_sensor_context(instance=instance, resources=_resources()))
        [evaluation] = first.asset_events
        assert evaluation.check_name == "import_not_stuck" and not evaluation.passed
        assert evaluation.metadata["runs"].value[0]["runId"] == str(run_id)
        unchanged = sensor(
            dg.build_sensor_context(instance=instance, resources=_resources(), cursor=first.cursor)
        )
        assert isinstance(unchanged, dg.SkipReason)
        # property_objects materialized since (a run without the check): it gets an evaluation of its own
        instance.report_runless_asset_event(dg.AssetMaterialization("property_objects"))
        materialized = sensor(
            dg.build_sensor_context(instance=instance, resources=_resources(), cursor=first.cursor)
        )
        assert not materialized.asset_events[0].passed and materialized.cursor != first.cursor
        [record] = instance.fetch_materializations(dg.AssetKey("property_objects"), limit=1).records
        assert materialized.asset_events[0].target_materialization_data.storage_id == record.storage_id
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE chessboard.talent_import_runs SET status = 'Failed'"))
        recovered = sensor(
            dg.build_sensor_context(instance=instance, resources=_resources(), cursor=first.cursor)
        )
        assert recovered.asset_events[0].passed


def test_an_import_run_whose_dagster_run_ended_between_steps_is_ended_by_the_run_status_sensor(env, engine):
    # a terminate between two steps (or a run worker failed by run monitoring): no step ended the row
    with dg.instance_for_test() as instance:
        rows = {}
        for name, status, event in (
            ("cancelled", dg.DagsterRunStatus.CANCELED, dg.DagsterEventType.RUN_CANCELED),
            ("failed", dg.DagsterRunStatus.FAILURE, dg.DagsterEventType.RUN_FAILURE),
        ):
            dagster_run = instance.create_run_for_job(
                dg.GraphDefinition(name="noop").to_job(name=talent_config.IMPORT_JOB),
                tags=talent_config.IMPORT_TAGS,
                status=status,
            )
            rows[name] = insert_import_run(engine, dagster_run_id=dagster_run.run_id)
            sensor = build_defs().resolve_sensor_def(f"talent_import_{status.value.lower()}_sensor")
            context = dg.build_run_status_sensor_context(
                sensor_name=sensor.name,
                dagster_instance=instance,
                dagster_run=dagster_run,
                dagster_event=dg.DagsterEvent(
                    event_type_value=event.value, job_name=talent_config.IMPORT_JOB
                ),
                resources=_resources(),
            )
            assert sensor(context) is None
            assert isinstance(sensor(context), dg.SkipReason)  # ended once: the second sees it ended
    status = {row["id"]: row for row in _runs(engine)}
    assert status[rows["cancelled"]]["status"] == "Cancelled"
    assert status[rows["failed"]]["status"] == "Failed"
    assert "ended CANCELED" in status[rows["cancelled"]]["error"]


@pytest.mark.slow
def test_terminating_the_dagster_run_cancels_the_import_after_the_current_page(
    env, engine, db_url, monkeypatch
):
    in_flight, release = threading.Event(), threading.Event()
    real_apply = runner.apply_snapshots

    def apply(conn, entity, items, ctx):
        if entity == "propertyObject" and not in_flight.is_set():
            in_flight.set()
            assert release.wait(30)
        return real_apply(conn, entity, items, ctx)

    monkeypatch.setattr(runner, "apply_snapshots", apply)
    monkeypatch.setattr(talent_session, "STOP_PROBE_SECONDS", 0)  # look at the run status every time
    run_id = str(uuid.uuid4())
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITION, _developers())
        outcome = {}
        thread = threading.Thread(
            target=lambda: outcome.setdefault(
                "result",
                import_job().execute_in_process(
                    instance=instance,
                    run_config=_config(workers=1),
                    tags=_range_tags(_developers()),
                    run_id=run_id,
                    raise_on_error=False,
                ),
            )
        )
        thread.start()
        assert in_flight.wait(240)
        instance.report_run_canceling(instance.get_run_by_id(run_id))  # what "Terminate" in the UI does first
        release.set()
        thread.join(240)  # a deadline for a loaded machine, not a timing
        result = outcome["result"]
        assert not result.success
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED
        assert _page_states(engine) == {"Done": 1, "Pending": _page_states(engine)["Pending"]}
        assert _page_states(engine)["Pending"] >= 1  # the page in flight, then nothing more
        [cancelled] = _runs(engine)
        assert cancelled["status"] == "Cancelled"
        # "Re-execute from failure": the page step the terminate stopped, working the pages it left,
        # and the steps that did not start; the same import run resumed and Completed
        resumed = dg.execute_job(
            dg.reconstructable(import_job),
            instance,
            run_config=_config(workers=1),
            tags=_range_tags(_developers()),
            reexecution_options=dg.ReexecutionOptions.from_failure(run_id, instance),
        )
        assert resumed.success
        retried = {e.step_key for e in resumed.all_events if e.event_type_value == "STEP_SUCCESS"}
        # the stopped page step again (it works the pages it left), then the stage's barrier
        assert "property_objects.property_objects_barrier" in retried
        assert "property_objects.property_objects_pages[0]" in retried
        applied = [
            r.user_message
            for r in instance.all_logs(resumed.run_id)
            if r.step_key == "property_objects.property_objects_pages[0]" and "applied" in r.user_message
        ]
        assert applied and "applied 0 page(s)" not in applied[0], applied  # the page step did the rest
    kinds = [e.event_type_value for e in result.all_events]
    # a deliberate cancel: no retry of the page step; the step it stopped is not a success but a
    # failure of one `cancelled:` line; the run CANCELED with no error (no interrupt's stack trace)
    assert "STEP_UP_FOR_RETRY" not in kinds, kinds
    [stopped] = [e for e in result.all_events if e.is_step_failure]
    assert stopped.step_key == "property_objects.property_objects_pages[0]"
    line = stopped.step_failure_data.user_failure_data.description
    assert line.startswith("cancelled: the run was stopped; ") and "\n" not in line, line
    assert "property_objects.property_objects_pages[0]" not in {
        e.step_key for e in result.all_events if e.event_type_value == "STEP_SUCCESS"
    }
    assert kinds[-1] == "PIPELINE_CANCELED"
    assert result.all_events[-1].event_specific_data.error is None
    assert _page_states(engine) == {"Done": _page_states(engine)["Done"]}  # the resumed run did the rest
    [run] = _runs(engine)
    assert run["id"] == cancelled["id"] and run["status"] == "Completed"
    assert run["stage_counters"]["PropertyObjects"]["applied"] == dataset.count(SPEC, "property-objects")
    with ImportLock(db_url) as lock:
        lock.acquire(timeout=0)

"""The Dagster shell of handbook-sync: the job and its materializations, the singleton sensor and
`pin-chessboard handbook-sync`, and `talent-sim rename` feeding it."""

from __future__ import annotations

import json

import dagster as dg
import pytest

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.definitions import build_definitions
from pin_chessboard_pipelines.defs.handbook_sync.definitions import (
    JOB_NAME,
    OP_NAME,
    definitions,
    handbook_sync,
    handbook_sync_sensor,
)
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.singleton import SINGLETON_TAG
from pin_chessboard_pipelines.handbook_sync import HandbookSync
from pin_chessboard_pipelines.handbook_sync import store as handbook_store
from pin_chessboard_pipelines.handbook_sync.values import HandbookValue, Kind
from pin_chessboard_pipelines.talent.simulator.handbook import publish_handbook
from tests.support.replica import apply, context_factory, tid
from tests.support.talent_kafka import count

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.usefixtures("broker_in_settings")]


def _resources(db_url: str) -> dict:
    return {"chessboard": ChessboardResource(database_url=db_url)}


def _sensor(db_url: str, instance: dg.DagsterInstance):
    return handbook_sync_sensor(dg.build_sensor_context(instance=instance, resources=_resources(db_url)))


def _moscow_projects(engine, n: int = 3) -> None:
    ctx = context_factory(engine)(run_id=None)
    developer = {"id": tid(), "version": 1, "name": "ГК"}
    apply(engine, "developer", [developer], ctx)
    items = [
        {
            "id": tid(),
            "developerId": developer["id"],
            "version": 1,
            "name": f"ЖК {i}",
            "type": "ResidentialComplex",
            "class": "Comfort",
            "constructionStatus": "Planned",
            "countryId": 643,
            "regionId": 77,
            "cityId": 1,
            "currencyId": 643,
        }
        for i in range(n)
    ]
    assert apply(engine, "project", items, ctx).applied == n


def test_job_republishes_and_materializes_the_handbook_replica(db_url, engine, broker):
    _moscow_projects(engine)
    assert main(["talent-sim", "rename", "--region", "77", "--name", "Город Москва"]) == 0
    with dg.DagsterInstance.ephemeral() as instance:
        result = handbook_sync.execute_in_process(
            instance=instance,
            resources=_resources(db_url),
            run_config={"ops": {OP_NAME: {"config": {"time_budget_seconds": 60}}}},
        )
        materialized = instance.get_latest_materialization_event(dg.AssetKey("handbook_replica"))
    assert result.success
    (output,) = [e for e in result.events_for_node(OP_NAME) if e.is_successful_output]
    metadata = {k: v.value for k, v in output.step_output_data.metadata.items()}
    assert (metadata["renamed"], metadata["republished"], metadata["stopped"]) == (1, 3, "idle")
    assert materialized is not None
    names = count(
        engine,
        "SELECT count(*) FROM chessboard.outbox_messages "
        "WHERE payload->'regionSnapshot'->>'name' = 'Город Москва' AND published_at IS NOT NULL",
    )
    assert names == 3  # on Kafka through the fast path


def test_sensor_starts_a_run_for_messages_or_a_pending_republish(db_url, engine, broker):
    with dg.DagsterInstance.ephemeral() as instance:
        unreadable = _sensor(db_url, instance)  # no handbook topics yet
        publish_handbook(broker)
        lagging = _sensor(db_url, instance)
        defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=_resources(db_url)))
        run = instance.create_run_for_job(
            job_def=defs.resolve_job_def(JOB_NAME), status=dg.DagsterRunStatus.STARTED
        )
        busy = _sensor(db_url, instance)
        instance.report_run_canceled(run)
        HandbookSync(engine, broker, poll_timeout=0.1).run(until_idle=True, max_seconds=60)
        caught_up = _sensor(db_url, instance)
        _moscow_projects(engine)
        with engine.begin() as conn:  # a rename whose republish a dead run left unfinished
            handbook_store.apply_values(conn, [HandbookValue(Kind.REGION, 77, "М", 99)], [], "test")
        pending = _sensor(db_url, instance)
    assert isinstance(unreadable, dg.SkipReason) and "cannot be read" in unreadable.skip_message
    assert isinstance(lagging, dg.SensorResult)
    (request,) = lagging.run_requests
    assert request.tags[SINGLETON_TAG] == "handbook-sync" and request.tags["pin/handbook-sync-lag"] == "17"
    assert isinstance(busy, dg.SkipReason) and run.run_id in busy.skip_message
    assert isinstance(caught_up, dg.SkipReason) and "caught up" in caught_up.skip_message
    assert isinstance(pending, dg.SensorResult)
    assert pending.run_requests[0].tags["pin/handbook-republish-pending"] == "1"


def test_handbook_sync_command(cli_env, engine, broker, capsys):
    assert main(["handbook-sync", "--until-idle"]) == 2  # no handbook topics yet
    assert capsys.readouterr().err.startswith("CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: handbook-sync: ")
    _moscow_projects(engine, 2)
    assert main(["talent-sim", "rename", "--city", "1", "--name", "Москва-Сити"]) == 0
    capsys.readouterr()
    assert main(["handbook-sync", "--until-idle", "--time-budget", "60"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Completed" and summary["republished"] == 2
    assert summary["renames"] == [
        {"kind": "city", "id": 1, "name": "Москва-Сити", "version": summary["renames"][0]["version"]}
    ]
    with dg.DagsterInstance.get() as instance:  # under its job, with the job's own snapshot
        run = instance.get_run_by_id(summary["runId"])
        assert run is not None and run.job_name == "handbook_sync" and run.remote_job_origin is not None
        assert (
            run.job_snapshot_id == build_definitions().resolve_job_def("handbook_sync").get_job_snapshot_id()
        )
    assert main(["talent-sim", "rename", "--city", "4242", "--name", "X"]) == 2  # no region known
    assert "give its region id" in capsys.readouterr().err


def test_a_poison_value_is_dead_lettered_and_replay_dlq_applies_it_once_fixed(
    cli_env, engine, broker, capsys
):
    """handbook-sync: a region whose write keeps failing (a trigger of the test's own refuses it)
    goes to `pin-chessboard-handbook-sync.dlq` while the renames around it apply;
    `pin-chessboard handbook-sync replay-dlq` (the replay_dead_letters job) puts it back at the end
    while its cause stays, and applies it once the cause is fixed."""
    from pin_chessboard_pipelines.talent.simulator.handbook import ensure_handbook_topics, rename_region

    ensure_handbook_topics(broker)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE FUNCTION chessboard.refuse_region() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN IF NEW.id = 78 THEN RAISE EXCEPTION 'region 78 refused'; END IF; RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER refuse_region BEFORE UPDATE ON chessboard.handbook_regions "
            "FOR EACH ROW EXECUTE FUNCTION chessboard.refuse_region()"
        )
    for region, name in ((77, "Город Москва"), (78, "Город Санкт-Петербург"), (50, "Подмосковье")):
        rename_region(broker, region, name, version=2)
    capsys.readouterr()

    assert main(["handbook-sync", "--until-idle", "--time-budget", "120"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["deadLetters"] == 1 and summary["applied"] == 2

    def names() -> dict[int, str]:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT id, name FROM chessboard.handbook_regions WHERE id IN (50, 77, 78)"
            )
            return dict(rows.all())

    assert (
        names()[77] == "Город Москва"
        and names()[50] == "Подмосковье"
        and names()[78] != "Город Санкт-Петербург"
    )

    assert main(["handbook-sync", "replay-dlq"]) == 0  # the cause is still there
    replayed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (replayed["read"], replayed["applied"], replayed["failedAgain"]) == (1, 0, 1)
    assert "region 78 refused" in replayed["errors"][0]["error"]
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TRIGGER refuse_region ON chessboard.handbook_regions")
    assert main(["handbook-sync", "replay-dlq"]) == 0
    replayed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (replayed["status"], replayed["read"], replayed["applied"]) == ("Completed", 1, 1)
    assert names()[78] == "Город Санкт-Петербург"

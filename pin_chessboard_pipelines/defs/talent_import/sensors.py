"""The import's sensors: new Talent developers become partitions; the stuck-import check every
minute; the import run of a terminated or failed Dagster run ended with it."""

import dagster as dg

from pin_chessboard_pipelines.defs.declare import running_sensor
from pin_chessboard_pipelines.defs.pools import ensure_pools
from pin_chessboard_pipelines.defs.resources import ChessboardResource, latest_materialization
from pin_chessboard_pipelines.defs.talent_import.checks import stuck_evaluation
from pin_chessboard_pipelines.defs.talent_import.config import (
    IMPORT_JOB,
    IMPORT_TAG,
    PROPERTY_OBJECTS_KEY,
    TALENT_DEVELOPERS,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import (
    list_talent_developers,
    new_developer_partitions,
)
from pin_chessboard_pipelines.errors import TalentSourceError
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.request import RunStatus


@running_sensor("talent_developers_sensor", 300)
def talent_developers_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource):
    """Adds a talent_developers partition for every Talent developer (key: its name at first sight and
    its id, kept through renames)"""
    ensure_pools(context.instance)  # the daemon's first tick: before an import or inventory run is queued
    try:
        developers = list_talent_developers(chessboard.settings)
    except TalentSourceError as error:
        return dg.SkipReason(f"Talent is not answering: {error}")
    new = new_developer_partitions(context.instance, chessboard.engine, developers)
    if not new:
        return dg.SkipReason(f"{len(developers)} developer(s), none new")
    return dg.SensorResult(dynamic_partitions_requests=[TALENT_DEVELOPERS.build_add_request(new)])


@running_sensor("talent_import_stuck_sensor", 60)
def talent_import_stuck_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource):
    """Evaluates the import_not_stuck check of property_objects every minute: reported when its outcome
    changed or property_objects was materialized since (by a run without the check)"""
    target = latest_materialization(context.instance, PROPERTY_OBJECTS_KEY)
    evaluation, stuck = stuck_evaluation(chessboard, target=target)
    cursor = stuck_cursor(stuck, target.storage_id if target else None)
    if cursor == context.cursor:
        return dg.SkipReason(f"unchanged: {cursor}")
    return dg.SensorResult(asset_events=[evaluation], cursor=cursor)


def stuck_cursor(stuck: list[str], latest_materialization: int | None) -> str:
    """What the last reported evaluation was about: its outcome and the materialization it covers
    (a new materialization needs an evaluation of its own, or the check reads "Not evaluated")."""
    state = "stuck:" + ",".join(stuck) if stuck else "ok"
    return (
        state if latest_materialization is None else f"{state} after materialization {latest_materialization}"
    )


def _import_run_ended_sensor(dagster_status: dg.DagsterRunStatus, status: RunStatus) -> dg.SensorDefinition:
    """An import's Dagster run that ended `dagster_status` (from the UI, a backfill, the CLI; any
    job of the location, asset backfills included) ends its import run `status` when its steps did
    not: a terminate that fell between two steps, a run worker killed and failed by run monitoring.
    The operator then sees the import ended in the chessboard as in Dagster, and resumes it by
    "Re-execute from failure"."""
    name = f"talent_import_{dagster_status.value.lower()}_sensor"

    @dg.run_status_sensor(
        name=name,
        run_status=dagster_status,
        minimum_interval_seconds=10,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"An import's Dagster run ended {dagster_status.value}: its import run, still "
        f"Running with that Dagster run, ends {status.value} (its held recalc requests due)",
    )
    def _sensor(context: dg.RunStatusSensorContext, chessboard: ChessboardResource):
        run = context.dagster_run
        if run.tags.get(IMPORT_TAG) != IMPORT_JOB:
            return dg.SkipReason(f"run {run.run_id} is no import")
        settings = chessboard.settings
        with chessboard.engine.begin() as conn:
            ended = runs.end_run_of_dagster_run(
                conn,
                run.run_id,
                status,
                f"its Dagster run {run.run_id} ended {dagster_status.value}",
                **settings.recalc_timing,
            )
        if ended is None:
            return dg.SkipReason(f"run {run.run_id}: its import run had ended")
        context.log.info(f"import run {ended['id']} of Dagster run {run.run_id} ended {status.value}")
        return None

    return _sensor


talent_import_canceled_sensor = _import_run_ended_sensor(dg.DagsterRunStatus.CANCELED, RunStatus.CANCELLED)
talent_import_failure_sensor = _import_run_ended_sensor(dg.DagsterRunStatus.FAILURE, RunStatus.FAILED)

"""The import's sensors: new Talent developers become partitions; the stuck-import check every minute."""

import dagster as dg

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.checks import stuck_evaluation
from pin_chessboard_pipelines.defs.talent_import.config import TALENT_DEVELOPERS
from pin_chessboard_pipelines.defs.talent_import.partitions import (
    list_talent_developers,
    new_developer_partitions,
)
from pin_chessboard_pipelines.defs.talent_import.pool import ensure_import_pool
from pin_chessboard_pipelines.talent.client import TalentSourceError


@dg.sensor(
    name="talent_developers_sensor",
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a talent_developers partition for every Talent developer (key: name and id)",
)
def talent_developers_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource):
    ensure_import_pool(context.instance)  # the daemon's first tick: before anyone launches an import
    try:
        developers = list_talent_developers(chessboard.settings)
    except TalentSourceError as error:
        return dg.SkipReason(f"Talent is not answering: {error}")
    new = new_developer_partitions(context.instance, developers)
    if not new:
        return dg.SkipReason(f"{len(developers)} developer(s), none new")
    return dg.SensorResult(dynamic_partitions_requests=[TALENT_DEVELOPERS.build_add_request(new)])


@dg.sensor(
    name="talent_import_stuck_sensor",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Evaluates the import_not_stuck check of property_objects every minute",
)
def talent_import_stuck_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource):
    evaluation, stuck = stuck_evaluation(chessboard)
    state = "stuck:" + ",".join(stuck) if stuck else "ok"
    if state == context.cursor:
        return dg.SkipReason(f"unchanged: {state}")
    return dg.SensorResult(asset_events=[evaluation], cursor=state)

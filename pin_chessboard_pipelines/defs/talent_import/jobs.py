"""The import's jobs: the six stages over the selected developer partitions, and partition discovery."""

import dagster as dg

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.assets import STAGE_ASSETS
from pin_chessboard_pipelines.defs.talent_import.checks import import_not_stuck
from pin_chessboard_pipelines.defs.talent_import.config import DISCOVERY_JOB, IMPORT_JOB, IMPORT_TAGS
from pin_chessboard_pipelines.defs.talent_import.partitions import (
    add_developer_partitions,
    list_talent_developers,
)


@dg.op(name="discover_talent_developers")
def discover_talent_developers(context: dg.OpExecutionContext, chessboard: ChessboardResource) -> None:
    developers = list_talent_developers(chessboard.settings)
    added = add_developer_partitions(context.instance, chessboard.engine, developers)
    context.log.info(f"Talent lists {len(developers)} developer(s); {len(added)} new partition(s)")


@dg.job(
    name=DISCOVERY_JOB, description="Lists Talent developers and adds them as talent_developers partitions"
)
def talent_developers_discovery() -> None:
    discover_talent_developers()


talent_initial_import = dg.define_asset_job(
    IMPORT_JOB,
    # the stages with their checks: the six quarantine checks and import_not_stuck on property_objects
    selection=dg.AssetSelection.assets(*STAGE_ASSETS) | dg.AssetSelection.checks(import_not_stuck),
    tags=IMPORT_TAGS,
    description="talent-initial-import: the six stages over the selected developer partitions",
)

"""Dagster shell of the talent initial import (docs/talent-initial-import.md): six partitioned
assets over talent_import/, their checks, the import, full bootstrap and discovery jobs, four
sensors.

The launchpad config is config.TalentImportConfig (resource `talent_import`); the session of a run
is session.py's.
"""

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.assets import STAGE_ASSETS, TALENT_SOURCES
from pin_chessboard_pipelines.defs.talent_import.bootstrap import talent_full_bootstrap
from pin_chessboard_pipelines.defs.talent_import.checks import import_not_stuck
from pin_chessboard_pipelines.defs.talent_import.config import TalentImportConfig
from pin_chessboard_pipelines.defs.talent_import.jobs import (
    talent_developers_discovery,
    talent_initial_import,
)
from pin_chessboard_pipelines.defs.talent_import.replay import talent_replay_failed
from pin_chessboard_pipelines.defs.talent_import.sensors import (
    talent_developers_sensor,
    talent_import_canceled_sensor,
    talent_import_failure_sensor,
    talent_import_stuck_sensor,
)


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[*TALENT_SOURCES, *STAGE_ASSETS],
        asset_checks=[import_not_stuck],
        jobs=[
            talent_full_bootstrap,
            talent_initial_import,
            talent_developers_discovery,
            talent_replay_failed,
        ],
        sensors=[
            talent_developers_sensor,
            talent_import_stuck_sensor,
            talent_import_canceled_sensor,
            talent_import_failure_sensor,
        ],
        resources={"talent_import": TalentImportConfig()},
    )

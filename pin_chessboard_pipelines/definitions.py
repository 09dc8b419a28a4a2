"""The one root of the Dagster definitions: merges each domain's definitions, sets the executor
(CHESSBOARD_DAGSTER_EXECUTOR, defs/executors.py: the default of every job that names none), the
console logger (defs/loggers.py) and the resources."""

from __future__ import annotations

import dagster as dg

from pin_chessboard_pipelines.defs.analytics.definitions import definitions as analytics_definitions
from pin_chessboard_pipelines.defs.dead_letters.definitions import definitions as dead_letters_definitions
from pin_chessboard_pipelines.defs.executors import build_executor
from pin_chessboard_pipelines.defs.handbook_sync.definitions import definitions as handbook_sync_definitions
from pin_chessboard_pipelines.defs.loggers import LOGGERS
from pin_chessboard_pipelines.defs.metadata import with_metadata_standards
from pin_chessboard_pipelines.defs.outbox.definitions import definitions as outbox_definitions
from pin_chessboard_pipelines.defs.recalc.definitions import definitions as recalc_definitions
from pin_chessboard_pipelines.defs.resources import ChessboardResource, with_job_resources
from pin_chessboard_pipelines.defs.run_retention.definitions import definitions as run_retention_definitions
from pin_chessboard_pipelines.defs.runbook.definitions import definitions as runbook_definitions
from pin_chessboard_pipelines.defs.talent_import.definitions import definitions as talent_import_definitions
from pin_chessboard_pipelines.defs.talent_sync.definitions import definitions as talent_sync_definitions


def build_definitions() -> dg.Definitions:
    domains: list[dg.Definitions] = []
    domains.append(recalc_definitions())
    domains.append(outbox_definitions())
    domains.append(talent_import_definitions())
    domains.append(talent_sync_definitions())
    domains.append(handbook_sync_definitions())
    domains.append(dead_letters_definitions())
    domains.append(analytics_definitions())
    domains.append(run_retention_definitions())
    domains.append(runbook_definitions())
    merged = dg.Definitions.merge(
        *domains,
        dg.Definitions(
            resources={"chessboard": ChessboardResource()}, executor=build_executor(), loggers=LOGGERS
        ),
    )
    # each launchpad asks for the resources of its own job only (defs/resources.py)
    # (asset jobs are resolved there: against the assets with their standard metadata)
    return with_job_resources(with_metadata_standards(merged))


@dg.definitions
def defs() -> dg.Definitions:
    """The code location's definitions, built when Dagster loads the location (not at import: the
    forkserver of multiprocess steps imports this module once, each step builds them in ~30 ms)."""
    return build_definitions()

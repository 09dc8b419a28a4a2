"""Names, asset keys and the launchpad config of the talent initial import's Dagster shell
(docs/talent-initial-import.md#request)."""

import dagster as dg

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import ENTITIES, Entity

GROUP = "talent_import"
PARTITIONS = "talent_developers"
TALENT_DEVELOPERS = dg.DynamicPartitionsDefinition(name=PARTITIONS)
IMPORT_JOB = "talent_initial_import"
DISCOVERY_JOB = "talent_developers_discovery"
QUARANTINE_CHECK = "no_quarantined_items"
STUCK_CHECK = "import_not_stuck"
STOP_PROBE_SECONDS = 0.25  # how often a step looks whether its run was terminated
STUCK_SECONDS = 600  # alert: running without pages Done growing for 10 min (docs/talent-initial-import.md#metrics-logs-and-alerts)
# dagster.yaml limits runs per value of this tag: imports queue instead of waiting on the lock.
SINGLETON_TAGS = {"pin/singleton": IMPORT_JOB}


def asset_name(stage: Entity) -> str:
    """developers, projects, buildings, layout_groups, layouts, property_objects."""
    return stage.asset


ASSET_KEYS = {stage.stage: dg.AssetKey(asset_name(stage)) for stage in ENTITIES}
PROPERTY_OBJECTS_KEY = ASSET_KEYS[entities.PROPERTY_OBJECT.stage]


class TalentImportConfig(dg.ConfigurableResource):
    """The launchpad's TalentInitialImportRequest (resources.talent_import.config); the
    DeveloperIdFilter is the partition selection and the CorrelationId the root run id."""

    mode: str = "ApiPull"
    page_size: int | None = None  # None = CHESSBOARD_IMPORT_PAGE_SIZE
    project_id_filter: str | None = None  # a Talent project id: re-sync that project only
    dry_run: bool = False
    workers: int = 2  # parallel page workers

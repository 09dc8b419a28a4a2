"""Names, asset keys and the launchpad config of the talent initial import's Dagster shell
(docs/talent-initial-import.md#request)."""

from typing import Any, Literal

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.defs.pools import IMPORT_POOL
from pin_chessboard_pipelines.entities import ENTITIES, Entity

GROUP = "talent_import"
PARTITIONS = "talent_developers"
TALENT_DEVELOPERS = dg.DynamicPartitionsDefinition(name=PARTITIONS)
IMPORT_JOB = "talent_initial_import"
DISCOVERY_JOB = "talent_developers_discovery"
BOOTSTRAP_JOB = "talent_full_bootstrap"  # every developer in one import run, from its launchpad
QUARANTINE_CHECK = "no_quarantined_items"
STUCK_CHECK = "import_not_stuck"
STOP_PROBE_SECONDS = 0.25  # how often a step looks whether its run was terminated
STUCK_SECONDS = 600  # alert: running without pages Done growing for 10 min (docs/talent-initial-import.md#metrics-logs-and-alerts)
# dagster.yaml gives every pool one run at a time (granularity run): whatever launches an import
# (Materialize all, a backfill, the job's launchpad, GraphQL), a second one waits in the queue.
POOL = IMPORT_POOL
# Every import run carries this tag (the job's runs from the start, asset runs from their first
# stage): Runs, filtered by it, is the import's whole history.
IMPORT_TAG = "pin/import"
# Seed 004's maximum duration of a bootstrap, enforced by Dagster's run monitoring (dagster.yaml
# `run_monitoring`): past it the daemon marks the run CANCELING, the stages stop between pages
# (RunStopProbe) and the import run stays resumable (docs/talent-initial-import.md#maximum-duration).
MAX_RUNTIME_SECONDS = 6 * 3600
MAX_RUNTIME_TAG = "dagster/max_runtime"
IMPORT_TAGS = {IMPORT_TAG: IMPORT_JOB, MAX_RUNTIME_TAG: str(MAX_RUNTIME_SECONDS)}
# a refused run's tag: the one line saying why it ran no step (a second re-execution of a Completed import)
REFUSED_TAG = "pin/refused"
# the quarantine replay job: one at a time per value of this tag (dagster.yaml run limits)
SINGLETON_TAGS = {"pin/singleton": IMPORT_JOB}


def asset_name(stage: Entity) -> str:
    """developers, projects, buildings, layout_groups, layouts, property_objects."""
    return stage.asset


ASSET_KEYS = {stage.stage: dg.AssetKey(asset_name(stage)) for stage in ENTITIES}
# Upstream of each stage: the Talent source as an external asset (talent/developers, ...).
TALENT_GROUP = "talent"
TALENT_KEYS = {stage.stage: dg.AssetKey(["talent", asset_name(stage)]) for stage in ENTITIES}
OWNERS = ["team:pin-platform-core"]
PROPERTY_OBJECTS_KEY = ASSET_KEYS[entities.PROPERTY_OBJECT.stage]


def _mode_field() -> Any:
    return Field(
        default="ApiPull",
        description="ApiPull: pages of the Talent HTTP API. TopicReplay: the compacted Talent topics "
        "from offset 0 (resets the talent-sync consumer group).",
    )


def _page_size_field() -> Any:
    return Field(
        default=None,
        ge=1,
        le=2000,
        description="Items per page, 1..2000. Empty: CHESSBOARD_IMPORT_PAGE_SIZE (500). A resumed "
        "import keeps the page size it started with.",
    )


def _dry_run_field() -> Any:
    return Field(
        default=False,
        description="Validate and count only: the run and its pages are recorded, nothing else is "
        "written (no replica row, quarantine row, outbox row or recalc request).",
    )


def _workers_field() -> Any:
    return Field(
        default=2,
        ge=1,
        le=32,
        description="Page workers (threads) of each process that works on a stage.",
    )


def _processes_field() -> Any:
    return Field(
        default=1,
        ge=1,
        le=16,
        description="Processes that work on each stage at once, 1..16: the page steps of a stage "
        "(OS processes with CHESSBOARD_DAGSTER_EXECUTOR=multiprocess, pods with k8s; one after "
        "another in_process). Each claims its own pages; a DryRun takes 1.",
    )


class TalentImportConfig(dg.ConfigurableResource):
    """TalentInitialImportRequest (docs/talent-initial-import.md#request): the developer partitions
    of the run are the DeveloperIdFilter (all of them: no filter), the CorrelationId is the root
    run id (re-execution resumes the same import run)."""

    mode: Literal["ApiPull", "TopicReplay"] = _mode_field()
    page_size: int | None = _page_size_field()
    project_id_filter: str | None = Field(
        default=None,
        description="A Talent project id: re-sync that project only (ProjectIdFilter), on its "
        "developer's partition alone (other partitions are refused). Empty: the selected developer "
        "partitions.",
    )
    dry_run: bool = _dry_run_field()
    workers: int = _workers_field()
    processes: int = _processes_field()


class FullBootstrapConfig(dg.Config):
    """The launchpad of talent_full_bootstrap: the request of an import of every developer (the
    talent_import resource's config without the project filter, which is a one-partition re-sync)."""

    mode: Literal["ApiPull", "TopicReplay"] = _mode_field()
    page_size: int | None = _page_size_field()
    dry_run: bool = _dry_run_field()
    workers: int = _workers_field()
    processes: int = _processes_field()

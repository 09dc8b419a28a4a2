"""The `talent_full_bootstrap` job: "all developers, this config" from one launchpad
(docs/talent-initial-import.md#a-full-bootstrap-from-the-launchpad).

Its one op lists the developers of the source (the missing talent_developers partitions are
added), then submits ONE run of the `talent_initial_import` asset job over the whole partition
range (the `dagster/asset_partition_range_*` tags Dagster's own "Launch as single run" sets) with
the launchpad's config as `resources.talent_import.config`. That run is the import: it belongs to
its job (the code location's origin), carries `pin/import`, waits in the import's pool like any
other, and is resumed with "Re-execute from failure" on its own page. No backfill is involved.
"""

import logging

import dagster as dg

from pin_chessboard_pipelines.defs import dagster_private as private
from pin_chessboard_pipelines.defs.fan_out import concurrent_steps_config
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.config import (
    BOOTSTRAP_JOB,
    IMPORT_JOB,
    PARTITIONS,
    FullBootstrapConfig,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import add_developer_partitions
from pin_chessboard_pipelines.errors import ChessboardError, error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import.request import ImportMode
from pin_chessboard_pipelines.talent_import.sources import make_source

log = logging.getLogger(__name__)

BOOTSTRAP_OP = "launch_full_bootstrap"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
LAUNCHED_BY_TAG = "pin/launched-by"  # the import run's tag: the talent_full_bootstrap run that submitted it
TRIGGER_TAG = "pin/trigger"


def import_run_config(config: FullBootstrapConfig) -> dict:
    """The launchpad's request as the import job's run config (its page steps all at once)."""
    return {
        "resources": {"talent_import": {"config": config.model_dump(exclude_none=True)}},
        **concurrent_steps_config(config.processes),
    }


def import_run_tags(job_tags: dict[str, str], partition_keys: list[str], launched_by: str) -> dict[str, str]:
    """The import run's tags: the job's own (pin/import, max runtime), the whole partition range as
    one run, and where it came from."""
    return {
        **job_tags,
        RANGE_START_TAG: partition_keys[0],
        RANGE_END_TAG: partition_keys[-1],
        TRIGGER_TAG: BOOTSTRAP_JOB,
        LAUNCHED_BY_TAG: launched_by,
    }


def _developers(settings: Settings, config: FullBootstrapConfig, chessboard: ChessboardResource) -> list:
    """(Talent id, name) of every developer the mode's source lists."""
    source = make_source(ImportMode(config.mode), settings, dry_run=config.dry_run, engine=chessboard.engine)
    try:
        return source.developers()
    finally:
        source.close()


def earlier_import(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRun | None:
    """The import run a failed run this one re-executes submitted (its parent, or the parent's
    parent while they failed): a bootstrap whose worker died after the submit and was retried by
    the daemon (dagster.yaml `run_retries`) or re-executed from failure hands that import on, it
    never submits a second one. None for a first run or one whose failed parents submitted none."""
    parent_id = run.parent_run_id
    while parent_id is not None:
        parent = instance.get_run_by_id(parent_id)
        if parent is None or parent.status != dg.DagsterRunStatus.FAILURE:
            return None
        submitted = instance.get_runs(filters=dg.RunsFilter(tags={LAUNCHED_BY_TAG: parent_id}), limit=1)
        if submitted:
            return submitted[0]
        parent_id = parent.parent_run_id
    return None


def _submit_import(context: dg.OpExecutionContext, config: FullBootstrapConfig, keys: list[str]) -> str:
    """Creates the import run as the UI's launch would (the location's origin, the job's snapshot)
    and puts it in the run queue; returns its run id. A re-execution of a failed bootstrap that had
    submitted its import returns that one (queued now if its submit never happened)."""
    own = context.dagster_run
    earlier = earlier_import(context.instance, own)
    if earlier is not None:
        if earlier.status == dg.DagsterRunStatus.NOT_STARTED:  # created, the worker died before the submit
            context.instance.submit_run(earlier.run_id, workspace=None)  # type: ignore[arg-type]
        return earlier.run_id
    if own.remote_job_origin is None or own.job_code_origin is None:
        raise dg.Failure(
            description=f"{BOOTSTRAP_JOB} submits the import to the Dagster instance's run queue: launch "
            "it from its launchpad (or GraphQL), not in process"
        )
    if not isinstance(context.instance.run_coordinator, dg.QueuedRunCoordinator):
        raise dg.Failure(
            description=f"{BOOTSTRAP_JOB} needs the QueuedRunCoordinator of the project's dagster.yaml"
        )
    job = context.repository_def.get_job(IMPORT_JOB)
    run = context.instance.create_run_for_job(
        job_def=job,
        run_config=import_run_config(config),
        tags=import_run_tags(dict(job.run_tags), keys, own.run_id),
        remote_job_origin=private.RemoteJobOrigin(own.remote_job_origin.repository_origin, IMPORT_JOB),
        job_code_origin=private.JobPythonOrigin(IMPORT_JOB, own.job_code_origin.repository_origin),
    )
    # the QueuedRunCoordinator only enqueues: the daemon launches the run from its origin
    context.instance.submit_run(run.run_id, workspace=None)  # type: ignore[arg-type]
    return run.run_id


@dg.op(
    name=BOOTSTRAP_OP,
    out=dg.Out(dg.Nothing),
    description="Lists the source's developers (adds the missing talent_developers partitions), then "
    "submits one talent_initial_import run over every partition with this config",
)
def launch_full_bootstrap(
    context: dg.OpExecutionContext, config: FullBootstrapConfig, chessboard: ChessboardResource
):
    settings = chessboard.settings
    try:
        require_talent_sync_enabled(settings)
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    try:
        developers = _developers(settings, config, chessboard)
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    except Exception as error:  # noqa: BLE001 - the client already retried: the source is not reachable now
        raise dg.Failure(description=f"listing the developers ({config.mode}): {error_line(error)}") from None
    added = add_developer_partitions(context.instance, chessboard.engine, developers)
    keys = list(context.instance.get_dynamic_partitions(PARTITIONS))
    if not keys:
        raise dg.Failure(description=f"the source ({config.mode}) lists no developer: nothing to import")
    run_id = _submit_import(context, config, keys)
    log_event(
        log,
        logging.INFO,
        "bootstrap-submitted",
        DagsterRunId=run_id,
        Developers=len(keys),
        NewPartitions=len(added),
        Mode=config.mode,
        DryRun=config.dry_run,
    )
    yield dg.Output(
        None,
        metadata={
            "import_run": dg.MetadataValue.dagster_run(run_id),
            "developers": dg.MetadataValue.int(len(keys)),
            "partitions_added": dg.MetadataValue.int(len(added)),
            "summary": dg.MetadataValue.json(
                {"importRunId": run_id, "developers": len(keys), "partitionsAdded": len(added)}
            ),
        },
    )


@dg.job(
    name=BOOTSTRAP_JOB,
    description="A full bootstrap: every Talent developer in one talent_initial_import run, with this "
    "launchpad's config (mode, page_size, dry_run, workers, processes). This run lists the developers "
    "and submits the import run (linked in its metadata as import_run); the import's progress, "
    "result and resume are that run's.",
)
def talent_full_bootstrap() -> None:
    launch_full_bootstrap()

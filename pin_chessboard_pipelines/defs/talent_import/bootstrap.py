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

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.config import (
    BOOTSTRAP_JOB,
    IMPORT_JOB,
    FullBootstrapConfig,
)
from pin_chessboard_pipelines.defs.talent_import.launch import ImportLauncher
from pin_chessboard_pipelines.errors import ChessboardError, error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled

log = logging.getLogger(__name__)

BOOTSTRAP_OP = "launch_full_bootstrap"


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
    launcher = ImportLauncher(context.instance, chessboard.engine, settings)
    try:
        require_talent_sync_enabled(settings)
        developers = launcher.developers(config)
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    except Exception as error:  # noqa: BLE001 - the client already retried: the source is not reachable now
        raise dg.Failure(description=f"listing the developers ({config.mode}): {error_line(error)}") from None
    keys, added = launcher.add_partitions(developers)
    if not keys:
        raise dg.Failure(description=f"the source ({config.mode}) lists no developer: nothing to import")
    own = context.dagster_run
    if own.remote_job_origin is None or own.job_code_origin is None:
        raise dg.Failure(
            description=f"{BOOTSTRAP_JOB} submits the import to the Dagster instance's run queue: launch "
            "it from its launchpad (or GraphQL), not in process"
        )
    if not isinstance(context.instance.run_coordinator, dg.QueuedRunCoordinator):
        raise dg.Failure(
            description=f"{BOOTSTRAP_JOB} needs the QueuedRunCoordinator of the project's dagster.yaml"
        )
    run_id = launcher.submit(config, keys, own, context.repository_def.get_job(IMPORT_JOB))
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

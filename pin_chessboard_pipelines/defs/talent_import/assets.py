"""The six stage assets of the talent initial import (docs/talent-initial-import.md#stages-and-barriers).

developers -> projects -> buildings -> layout_groups -> layouts -> property_objects share one
DynamicPartitionsDefinition keyed by Talent developer id; the dependency edges are the stage
barriers. Materializing one partition re-syncs one developer (DeveloperIdFilter); a run over all
partitions (single-run backfill) lists the source without a developer filter.
"""

import warnings

import dagster as dg

from pin_chessboard_pipelines.defs.dagster_private import DagsterExecutionInterruptedError
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.checks import quarantine_check
from pin_chessboard_pipelines.defs.talent_import.config import (
    ASSET_KEYS,
    GROUP,
    IMPORT_JOB,
    IMPORT_TAG,
    IMPORT_TAGS,
    OWNERS,
    POOL,
    QUARANTINE_CHECK,
    TALENT_DEVELOPERS,
    TALENT_GROUP,
    TALENT_KEYS,
    TalentImportConfig,
    asset_name,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import developer_id_of
from pin_chessboard_pipelines.defs.talent_import.session import (
    RunStopProbe,
    correlation_id_of,
    developer_ids_of,
    end_session,
    open_session,
)
from pin_chessboard_pipelines.entities import DEVELOPER, ENTITIES, Entity, pin_id
from pin_chessboard_pipelines.errors import ChessboardError, error_line
from pin_chessboard_pipelines.talent_import import runs, sessions
from pin_chessboard_pipelines.talent_import.progress import StageProgress
from pin_chessboard_pipelines.talent_import.request import RunStatus
from pin_chessboard_pipelines.talent_import.result import StageCounters
from pin_chessboard_pipelines.talent_import.runner import ImportSession, StageFailed, StageReport


def _stages_in_run(context: dg.AssetExecutionContext) -> list[str]:
    """The stage assets this Dagster run executes, in stage order (the last one finishes the import)."""
    selected = context.job_def.asset_layer.selected_asset_keys
    steps = context.run.step_keys_to_execute
    return [
        stage.stage
        for stage in ENTITIES
        if ASSET_KEYS[stage.stage] in selected and (steps is None or asset_name(stage) in steps)
    ]


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


# What the materialization metadata of a stage asset means, shown on every stage asset's page.
METADATA_DOC = """
Materialization metadata (per developer partition):

| key | meaning |
|---|---|
| developer_id | the Talent id of the partition's developer |
| planned / applied / skipped / failed | this developer's items of the stage in the import run: read from the source / created or changed / no-op by the version guard / quarantined; an item whose parent is not in the replica (an orphan) counts under the developer whose listing it came from |
| unattributed_planned / unattributed_applied / unattributed_skipped / unattributed_failed | items of the run no developer partition counts: orphans read by an unfiltered (all developers) or project listing, whose developer nothing tells |
| import_planned / import_applied / import_skipped / import_failed | the same for the whole import run (every developer of it; items whose developer is unknown included) |
| import_run_id / correlation_id / import_status | the talent_import_runs row (CorrelationId = the first Dagster run of the import) and its status |
| scopes | the walks of the import: `all developers` or the filtered developer / project |
| dry_run | a DryRun: the counters say what a real run would do, nothing was written |
| pages | pages of the stage in the import run |
| pages_processed | pages this Dagster run applied (the rest were Done in an earlier run of a resumed import) |
| duration_seconds / items_processed / items_per_second | this Dagster run's own stage time, items and rate |
| page_p99_ms | p99 of this run's page apply times |
"""


def _run_metadata(
    session: ImportSession, report: StageReport, progress: StageProgress
) -> dict[str, dg.MetadataValue]:
    """What every partition of the run shares: the import run, and this Dagster run's own work."""
    counters = report.counters
    return {
        "import_run_id": dg.MetadataValue.text(str(session.run_id)),
        "correlation_id": dg.MetadataValue.text(session.correlation_id),
        "import_status": dg.MetadataValue.text(str(session.run_row["status"])),
        "scopes": dg.MetadataValue.text(", ".join(k or "all developers" for k in session.scope_keys)),
        "dry_run": dg.MetadataValue.bool(bool(session.run_row["dry_run"])),
        "import_planned": dg.MetadataValue.int(counters.planned),
        "import_applied": dg.MetadataValue.int(counters.applied),
        "import_skipped": dg.MetadataValue.int(counters.skipped),
        "import_failed": dg.MetadataValue.int(counters.failed),
        "pages": dg.MetadataValue.int(report.pages),
        "pages_processed": dg.MetadataValue.int(report.pages_processed),
        "duration_seconds": dg.MetadataValue.float(round(progress.seconds, 3)),
        "items_processed": dg.MetadataValue.int(progress.items),
        "items_per_second": dg.MetadataValue.float(round(progress.items_per_second, 1)),
        "page_p99_ms": dg.MetadataValue.float(round(_p99(report.page_durations_ms), 1)),
    }


def _partition_metadata(session: ImportSession, stage: Entity, partition_keys: list[str]) -> dict:
    """Partition key -> that developer's own counters of the stage (tenant = the developer's PIN id)."""
    with session.engine.connect() as conn:
        by_tenant = runs.stage_tenant_counters(conn, session.run_id, stage.stage)
    unknown = by_tenant.get("", StageCounters())
    unattributed = {
        "unattributed_planned": dg.MetadataValue.int(unknown.planned),
        "unattributed_applied": dg.MetadataValue.int(unknown.applied),
        "unattributed_skipped": dg.MetadataValue.int(unknown.skipped),
        "unattributed_failed": dg.MetadataValue.int(unknown.failed),
    }
    metadata = {}
    for key in partition_keys:
        developer_id = developer_id_of(key)
        own = by_tenant.get(str(pin_id(DEVELOPER.name, developer_id)), StageCounters())
        metadata[key] = {
            "developer_id": dg.MetadataValue.text(developer_id),
            "planned": dg.MetadataValue.int(own.planned),
            "applied": dg.MetadataValue.int(own.applied),
            "skipped": dg.MetadataValue.int(own.skipped),
            "failed": dg.MetadataValue.int(own.failed),
            **unattributed,
        }
    return metadata


def materialize_stage(
    context: dg.AssetExecutionContext,
    stage: Entity,
    chessboard: ChessboardResource,
    talent_import: TalentImportConfig,
) -> dg.MaterializeResult:
    correlation_id = correlation_id_of(context)
    session = sessions.get(correlation_id)
    if session is None:
        try:
            session = open_session(
                chessboard.settings,
                chessboard.url,
                talent_import,
                correlation_id=correlation_id,
                developer_ids=developer_ids_of(context),
                dagster_run_id=context.run.run_id,
                should_stop=RunStopProbe(context.instance, context.run.run_id),
            )
        except ChessboardError as error:
            raise dg.Failure(description=error.line()) from None
        context.log.info(
            f"import run {session.run_id} {'resumed' if session.resumed else 'started'} "
            f"(correlation id {correlation_id}, scopes {session.scope_keys})"
        )
    if context.run.tags.get(IMPORT_TAG) != IMPORT_JOB:
        context.instance.add_run_tags(context.run.run_id, IMPORT_TAGS)  # Runs filtered by it: every import
    progress = StageProgress(session.engine, session.run_id, stage.stage, session.log_fields(stage.stage))
    try:
        with progress:
            report = session.run_stage(stage)
        if report.cancelled:
            raise DagsterExecutionInterruptedError()
    except StageFailed as error:
        end_session(correlation_id, RunStatus.FAILED, str(error))
        raise dg.Failure(
            description=f"{error} (resumable: re-execute from failure)",
            metadata={"import_run_id": str(session.run_id)},
        ) from None
    except (DagsterExecutionInterruptedError, KeyboardInterrupt):
        end_session(correlation_id, RunStatus.CANCELLED, "cancelled")
        raise
    except Exception as error:
        # one line, the cause: the run row and the step failure say the same
        end_session(correlation_id, RunStatus.FAILED, error_line(error))
        raise dg.Failure(
            description=f"stage {stage.name} failed: {error_line(error)} (resumable: re-execute from failure)",
            metadata={"import_run_id": str(session.run_id)},
        ) from None
    except BaseException as error:
        end_session(correlation_id, RunStatus.FAILED, error_line(error))
        raise
    if stage.stage == _stages_in_run(context)[-1]:
        end_session(correlation_id, RunStatus.COMPLETED)
    if report.counters.applied and not session.request.dry_run:
        chessboard.relay_outbox(context)
    for key, own in _partition_metadata(session, stage, list(context.partition_keys)).items():
        context.add_asset_metadata(own, partition_key=key)
    return dg.MaterializeResult(
        metadata=_run_metadata(session, report, progress),
        check_results=[quarantine_check(session, stage, report)],
    )


def _talent_source(stage: Entity) -> dg.AssetSpec:
    return dg.AssetSpec(
        TALENT_KEYS[stage.stage],
        group_name=TALENT_GROUP,
        kinds={"kafka"},
        owners=OWNERS,
        description=f"Talent Chessboard's {stage.name} snapshots: the HTTP collection "
        f"`/api/v1/{stage.collection}` (ApiPull) and the compacted topic `{stage.topic}` "
        "(TopicReplay, talent-sync). External: Talent owns it.",
    )


TALENT_SOURCES = [_talent_source(stage) for stage in ENTITIES]


def _stage_asset(stage: Entity, parent: Entity | None) -> dg.AssetsDefinition:
    key = ASSET_KEYS[stage.stage]

    @dg.asset(
        key=key,
        group_name=GROUP,
        partitions_def=TALENT_DEVELOPERS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=POOL,
        deps=[TALENT_KEYS[stage.stage], *([ASSET_KEYS[parent.stage]] if parent else [])],
        kinds={"postgres"},
        owners=OWNERS,
        description=f"Talent {stage.name} replicas in `chessboard.{stage.table}`, stage {stage.stage} "
        "of the talent initial import (docs/talent-initial-import.md). One partition per Talent "
        "developer; materializing every partition in one run is the full bootstrap (listed without a "
        "developer filter); launchpad config: `resources.talent_import.config`.\n" + METADATA_DOC,
        check_specs=[
            dg.AssetCheckSpec(
                QUARANTINE_CHECK, asset=key, description="no item of this stage was quarantined"
            )
        ],
    )
    def _asset(
        context: dg.AssetExecutionContext, chessboard: ChessboardResource, talent_import: TalentImportConfig
    ) -> dg.MaterializeResult:
        return materialize_stage(context, stage, chessboard, talent_import)

    return _asset


with warnings.catch_warnings():
    # single-run backfills: one import run over all partitions (docs/talent-initial-import.md#filters)
    warnings.simplefilter("ignore", dg.BetaWarning)
    STAGE_ASSETS = [
        _stage_asset(stage, parent) for parent, stage in zip((None, *ENTITIES[:-1]), ENTITIES, strict=True)
    ]

"""The six stage assets of the talent initial import (docs/talent-initial-import.md#stages-and-barriers).

developers -> projects -> buildings -> layout_groups -> layouts -> property_objects share one
DynamicPartitionsDefinition keyed by Talent developer id; the dependency edges are the stage
barriers. Materializing one partition re-syncs one developer (DeveloperIdFilter); a run over all
partitions (single-run backfill) lists the source without a developer filter.
"""

import warnings
from typing import Any

import dagster as dg

from pin_chessboard_pipelines.defs.dagster_private import DagsterExecutionInterruptedError
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.checks import quarantine_check
from pin_chessboard_pipelines.defs.talent_import.config import (
    ASSET_KEYS,
    GROUP,
    QUARANTINE_CHECK,
    TALENT_DEVELOPERS,
    TalentImportConfig,
    asset_name,
)
from pin_chessboard_pipelines.defs.talent_import.session import (
    RunStopProbe,
    correlation_id_of,
    developer_ids_of,
    end_session,
    open_session,
)
from pin_chessboard_pipelines.entities import ENTITIES, Entity
from pin_chessboard_pipelines.errors import ChessboardError, error_line
from pin_chessboard_pipelines.talent_import import sessions
from pin_chessboard_pipelines.talent_import.request import RunStatus
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


def _metadata(session: ImportSession, report: StageReport) -> dict[str, Any]:
    counters = report.counters
    return {
        "import_run_id": dg.MetadataValue.text(str(session.run_id)),
        "correlation_id": dg.MetadataValue.text(session.correlation_id),
        "import_status": dg.MetadataValue.text(str(session.run_row["status"])),
        "scopes": dg.MetadataValue.text(", ".join(k or "all developers" for k in session.scope_keys)),
        "dry_run": dg.MetadataValue.bool(bool(session.run_row["dry_run"])),
        "planned": dg.MetadataValue.int(counters.planned),
        "applied": dg.MetadataValue.int(counters.applied),
        "skipped": dg.MetadataValue.int(counters.skipped),
        "failed": dg.MetadataValue.int(counters.failed),
        "pages": dg.MetadataValue.int(report.pages),
        "pages_processed": dg.MetadataValue.int(report.pages_processed),
        "duration_seconds": dg.MetadataValue.float(round(report.duration_seconds, 3)),
        "items_per_second": dg.MetadataValue.float(round(report.items_per_second, 1)),
        "page_p99_ms": dg.MetadataValue.float(round(_p99(report.page_durations_ms), 1)),
    }


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
    try:
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
        chessboard.relay_outbox(context.log)
    context.log.info(
        f"{stage.stage}: planned {report.counters.planned}, applied {report.counters.applied}, "
        f"skipped {report.counters.skipped}, failed {report.counters.failed} in {report.pages} pages"
    )
    return dg.MaterializeResult(
        metadata=_metadata(session, report),
        check_results=[quarantine_check(session, stage, report)],
    )


def _stage_asset(stage: Entity, parent: Entity | None) -> dg.AssetsDefinition:
    key = ASSET_KEYS[stage.stage]

    @dg.asset(
        key=key,
        group_name=GROUP,
        partitions_def=TALENT_DEVELOPERS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        deps=[ASSET_KEYS[parent.stage]] if parent else [],
        kinds={"postgres"},
        description=f"Talent {stage.name} replicas in chessboard.{asset_name(stage)} "
        f"(stage {stage.stage} of talent-initial-import)",
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

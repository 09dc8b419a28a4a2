"""The import's checks (docs/talent-initial-import.md#metrics-logs-and-alerts): no quarantined
item per stage (evaluated by the import, and again by a quarantine replay), and no Running import
without progress (import_not_stuck on property_objects)."""

import uuid

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.defs.dagster_private import AssetCheckEvaluationTargetMaterializationData
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.config import (
    ASSET_KEYS,
    PROPERTY_OBJECTS_KEY,
    QUARANTINE_CHECK,
    STUCK_CHECK,
    STUCK_SECONDS,
)
from pin_chessboard_pipelines.entities import ENTITIES, Entity
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.runner import ImportSession, StageReport


def quarantine_check(session: ImportSession, stage: Entity, report: StageReport) -> dg.AssetCheckResult:
    """The alert chessboard_import_failed_items_total > 0, per stage of this import run."""
    with session.engine.connect() as conn:
        by_code = [r for r in runs.failed_items_of_run(conn, session.run_id) if r["stage"] == stage.stage]
    return dg.AssetCheckResult(
        check_name=QUARANTINE_CHECK,
        passed=report.counters.failed == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "failed": dg.MetadataValue.int(report.counters.failed),
            "by_error_code": dg.MetadataValue.json({r["error_code"]: r["items"] for r in by_code}),
            "import_run_id": dg.MetadataValue.text(str(session.run_id)),
        },
        description="quarantined items of this stage in talent_import_failed_items (runbook: fix in Talent, replay)",
    )


def quarantine_evaluations(
    instance: dg.DagsterInstance, engine: Engine, replayed_run: uuid.UUID | None, replayed_by: str
) -> list[dg.AssetCheckEvaluation]:
    """`no_quarantined_items` again after a replay, on each stage's latest materialization whose
    import run the replay covered (`replayed_run`; None: every run): what that import run still has
    quarantined in the stage."""
    evaluations = []
    for stage in ENTITIES:
        key = ASSET_KEYS[stage.stage]
        records = instance.fetch_materializations(key, limit=1).records
        materialization = records[0].asset_materialization if records else None
        entry = materialization.metadata.get("import_run_id") if materialization else None
        if entry is None:
            continue
        import_run = uuid.UUID(str(entry.value))
        if replayed_run is not None and import_run != replayed_run:
            continue  # the latest materialization is another import's: its evaluation stands
        with engine.connect() as conn:
            by_code = [r for r in runs.failed_items_of_run(conn, import_run) if r["stage"] == stage.stage]
        failed = sum(r["items"] for r in by_code)
        evaluations.append(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=QUARANTINE_CHECK,
                passed=failed == 0,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={
                    "failed": dg.MetadataValue.int(failed),
                    "by_error_code": dg.MetadataValue.json({r["error_code"]: r["items"] for r in by_code}),
                    "import_run_id": dg.MetadataValue.text(str(import_run)),
                    "replayed_by": dg.MetadataValue.text(replayed_by),
                },
                description=f"after the quarantine replay {replayed_by}: {failed} item(s) of this stage "
                "still quarantined"
                if failed
                else f"after the quarantine replay {replayed_by}: no item of this stage quarantined",
                target_materialization_data=AssetCheckEvaluationTargetMaterializationData(
                    run_id=records[0].run_id, storage_id=records[0].storage_id, timestamp=records[0].timestamp
                ),
            )
        )
    return evaluations


def stuck_evaluation(
    chessboard: ChessboardResource,
    stuck_seconds: float = STUCK_SECONDS,
    target: AssetCheckEvaluationTargetMaterializationData | None = None,
) -> tuple[dg.AssetCheckEvaluation, list[str]]:
    """The import_not_stuck evaluation (on the `target` materialization of property_objects) and
    the ids of the stuck import runs."""
    with chessboard.engine.connect() as conn:
        stuck = runs.stuck_runs(conn, stuck_seconds)
    ids = [str(r["id"]) for r in stuck]
    evaluation = dg.AssetCheckEvaluation(
        asset_key=PROPERTY_OBJECTS_KEY,
        check_name=STUCK_CHECK,
        passed=not stuck,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "stuck_runs": dg.MetadataValue.int(len(stuck)),
            "runs": dg.MetadataValue.json(
                [
                    {
                        "runId": str(r["id"]),
                        "correlationId": r["correlation_id"],
                        "lastProgressAt": r["last_progress_at"].isoformat(),
                    }
                    for r in stuck
                ]
            ),
        },
        description=f"a Running import without a page Done for {stuck_seconds:g} s"
        " (runbook: check the advisory lock holder and page leases, then resume)",
        target_materialization_data=target,
    )
    return evaluation, ids


@dg.asset_check(
    asset=PROPERTY_OBJECTS_KEY, name=STUCK_CHECK, description="no Running import without progress for 10 min"
)
def import_not_stuck(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    evaluation, _ = stuck_evaluation(chessboard)
    return dg.AssetCheckResult(
        passed=evaluation.passed,
        severity=evaluation.severity,
        metadata=evaluation.metadata,
        description=evaluation.description,
    )

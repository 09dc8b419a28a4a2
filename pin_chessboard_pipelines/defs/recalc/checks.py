"""The recalc's aggregates asset and its checks (docs/project-aggregates-recalc.md#audit): the
audit of the stored aggregates against their formulas and the poison rows, evaluated by each drain
that materializes the aggregates and hourly by their own job."""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.errors import RECALC_POISON
from pin_chessboard_pipelines.recalc.audit import audit, drift
from pin_chessboard_pipelines.recalc.queue import poison_rows

AUDIT_JOB_NAME = "chessboard_aggregates_audit"
AGGREGATES = dg.AssetSpec(
    "chessboard_aggregates",
    description=(
        "Denormalized aggregates of projects, buildings, layouts and layout groups in the chessboard "
        "store, kept by the project-aggregates-recalc drain (docs/project-aggregates-recalc.md). "
        "Every drain that recalculated projects records a materialization: projects recalculated, "
        "failed, skipped (archived) and poisoned, events republished, duration and rate."
    ),
    group_name="recalc",
    kinds={"postgres"},
    owners=["team:pin-platform-core"],
    # the replica rows every recalc reads (the import and talent-sync write them)
    deps=[entity.asset for entity in entities.ENTITIES],
)
AUDIT_CHECK = "aggregates_match_formulas"
POISON_CHECK = "no_poison_recalc_rows"


def _evaluation(
    check_name: str, failure: str | None, metadata: Mapping[str, dg.MetadataValue]
) -> dg.AssetCheckEvaluation:
    """An evaluation of a check of the aggregates (every one an ERROR): passed unless `failure`
    says what is wrong."""
    return dg.AssetCheckEvaluation(
        asset_key=AGGREGATES.key,
        check_name=check_name,
        passed=failure is None,
        severity=dg.AssetCheckSeverity.ERROR,
        description=failure,
        metadata=metadata,
    )


def poison_evaluation(rows: list[dict]) -> dg.AssetCheckEvaluation:
    failure = f"{RECALC_POISON}: {len(rows)} recalc row(s) kept for the runbook" if rows else None
    return _evaluation(POISON_CHECK, failure, _poison_metadata(rows))


def _poison_metadata(rows: list[dict]) -> dict[str, dg.MetadataValue]:
    return {
        "poison_rows": dg.MetadataValue.int(len(rows)),
        "rows": dg.MetadataValue.json(
            [
                {
                    "projectId": str(row["project_id"]),
                    "attemptCount": row["attempt_count"],
                    "lastError": row["last_error"],
                }
                for row in rows[:50]
            ]
        ),
    }


def _as_result(evaluation: dg.AssetCheckEvaluation) -> dg.AssetCheckResult:
    """A check's evaluation as the result its asset check function returns."""
    return dg.AssetCheckResult(
        passed=evaluation.passed,
        severity=evaluation.severity,
        description=evaluation.description,
        metadata=evaluation.metadata,
    )


@dg.asset_check(
    asset=AGGREGATES.key,
    name=AUDIT_CHECK,
    description="Stored aggregates equal count/min/max over property objects and layouts (0 divergences).",
)
def aggregates_audit_check(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    """The hourly audit; each drain that materializes the aggregates evaluates it too."""
    with chessboard.engine.connect() as conn:
        evaluation = audit_evaluation(conn)
    return _as_result(evaluation)


def audit_evaluation(conn: Any) -> dg.AssetCheckEvaluation:
    found = audit(conn)
    # a project with a pending recalc row is not drift (docs/project-aggregates-recalc.md#audit)
    divergences = drift(found)
    by_entity: dict[str, int] = {}
    for d in divergences:
        by_entity[d.entity] = by_entity.get(d.entity, 0) + 1
    metadata = {
        "divergences": dg.MetadataValue.int(len(divergences)),
        "pending": dg.MetadataValue.int(len(found) - len(divergences)),
        "projects_with_divergences": dg.MetadataValue.int(len({d.project_id for d in divergences})),
        "by_entity": dg.MetadataValue.json(by_entity),
        "sample": dg.MetadataValue.json([d.as_dict() for d in divergences[:50]]),
    }
    return _evaluation(AUDIT_CHECK, f"{len(divergences)} divergence(s)" if divergences else None, metadata)


@dg.asset_check(
    asset=AGGREGATES.key,
    name=POISON_CHECK,
    description=f"{RECALC_POISON}: no recalc row has reached the poison AttemptCount.",
)
def poison_rows_check(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    with chessboard.engine.connect() as conn:
        rows = poison_rows(conn, chessboard.settings.recalc_poison_attempts)
    return _as_result(poison_evaluation(rows))


chessboard_aggregates_audit = dg.define_asset_job(
    AUDIT_JOB_NAME,
    selection=dg.AssetSelection.checks_for_assets(AGGREGATES.key),
    description="Runs the audit and poison checks of the recalc aggregates.",
)

chessboard_aggregates_audit_schedule = dg.ScheduleDefinition(
    name="chessboard_aggregates_audit_hourly",
    job=chessboard_aggregates_audit,
    cron_schedule="17 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)

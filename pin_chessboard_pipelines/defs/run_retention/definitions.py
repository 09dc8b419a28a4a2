"""Run-history retention: a daily schedule deletes, with their event logs, the finished runs of the
high-frequency jobs (recalc drain, outbox relay, talent sync, the audits, this job) older than
CHESSBOARD_RUN_RETENTION_DAYS; import runs are kept (operations.md, "Dagster surface").

Only Dagster's own storage is touched, through the instance.
"""

import json
from datetime import UTC, datetime, timedelta

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.declare import one_op_job, utc_schedule
from pin_chessboard_pipelines.defs.handbook_sync.definitions import JOB_NAME as HANDBOOK_SYNC_JOB
from pin_chessboard_pipelines.defs.outbox.definitions import JOB_NAME as RELAY_JOB
from pin_chessboard_pipelines.defs.recalc.checks import AUDIT_JOB_NAME
from pin_chessboard_pipelines.defs.recalc.definitions import JOB_NAME as RECALC_JOB
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_sync.definitions import JOB_NAME as SYNC_JOB

JOB_NAME = "run_history_retention"
OP_NAME = "delete_old_runs"
SCHEDULE_NAME = "run_history_retention_daily"
OUTBOX_CHECK_JOB = "outbox_lag_check"
# The import's runs (talent_initial_import, asset jobs, discovery) are the audit trail: never here.
RETAINED_JOBS = (
    RECALC_JOB,
    RELAY_JOB,
    SYNC_JOB,
    HANDBOOK_SYNC_JOB,
    AUDIT_JOB_NAME,
    OUTBOX_CHECK_JOB,
    JOB_NAME,
)
FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
PAGE = 500


class RunRetentionConfig(dg.Config):
    retention_days: int | None = Field(
        default=None, ge=1, description="Overrides CHESSBOARD_RUN_RETENTION_DAYS for this run."
    )


def retention_cutoff(now: datetime, days: int) -> datetime:
    """Runs created before this are deleted."""
    return now - timedelta(days=days)


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def delete_old_runs(
    context: dg.OpExecutionContext, config: RunRetentionConfig, chessboard: ChessboardResource
) -> dg.Output:
    """Deletes the finished runs of the high-frequency jobs created before the cutoff, page by page."""
    days = config.retention_days or chessboard.settings.run_retention_days
    cutoff = retention_cutoff(datetime.now(UTC), days)
    deleted: dict[str, int] = {}
    for job_name in RETAINED_JOBS:
        count = 0
        while True:
            records = context.instance.get_run_records(
                filters=dg.RunsFilter(job_name=job_name, statuses=FINISHED, created_before=cutoff),
                limit=PAGE,
            )
            for record in records:
                context.instance.delete_run(record.dagster_run.run_id)
            count += len(records)
            if len(records) < PAGE:
                break
        deleted[job_name] = count
    context.log.info(f"run retention: {json.dumps({'cutoff': cutoff.isoformat(), 'deleted': deleted})}")
    return dg.Output(
        None,
        metadata={
            "retention_days": dg.MetadataValue.int(days),
            "cutoff": dg.MetadataValue.text(cutoff.isoformat()),
            "deleted_runs": dg.MetadataValue.int(sum(deleted.values())),
            "deleted_by_job": dg.MetadataValue.json(deleted),
        },
    )


run_history_retention = one_op_job(
    JOB_NAME,
    delete_old_runs,
    "Deletes old runs of the recalc, relay, sync and audit jobs; import runs are kept.",
)


run_history_retention_daily = utc_schedule(
    SCHEDULE_NAME,
    run_history_retention,
    "23 3 * * *",
    "Daily: deletes runs of the high-frequency jobs older than CHESSBOARD_RUN_RETENTION_DAYS.",
)


def definitions() -> dg.Definitions:
    return dg.Definitions(jobs=[run_history_retention], schedules=[run_history_retention_daily])

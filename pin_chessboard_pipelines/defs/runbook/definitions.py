"""The recalc runbook by clicks (docs/project-aggregates-recalc.md#runbook): one job, `recalc_runbook`,
whose launchpad takes a step (force recalc, reset poison, audit, status) and a project by its
Talent id, PIN id or name; every run records the queue's status as a materialization of the
`recalc_queue` asset (depth, due, held, poison, the oldest rows with their project names and DueAt),
and so does `recalc_queue_sensor` whenever the status changed, so the asset shows the queue as it is.

Thin shell: the project lookup and the status are recalc/runbook.py's, the writes recalc/queue.py's
(`request_recalc`, `reset_poison`, as `pin-chessboard recalc request|reset-poison`), the audit
recalc/audit.py's (as `recalc audit`).
"""

import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.declare import SensorTick, one_op_job, running_sensor
from pin_chessboard_pipelines.defs.metadata import TABLE_NAME_KEY, table_name
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.errors import ChessboardError, Refused
from pin_chessboard_pipelines.observability.logs import counter_fields, log_event
from pin_chessboard_pipelines.recalc.audit import Divergence, audit, drift
from pin_chessboard_pipelines.recalc.queue import queue_row, request_recalc, reset_poison
from pin_chessboard_pipelines.recalc.runbook import (
    ProjectRef,
    RecalcStatus,
    find_project,
    recalc_status,
    status_fingerprint,
)
from pin_chessboard_pipelines.store.tables import project_recalc_requests

JOB_NAME = "recalc_runbook"
OP_NAME = "recalc_runbook_step"
STATUS_ASSET = dg.AssetKey("recalc_queue")
AUDIT_SAMPLE = 50


RECALC_QUEUE = dg.AssetSpec(
    STATUS_ASSET,
    description=(
        "The project recalc queue (`chessboard.project_recalc_requests`, docs/project-aggregates-recalc.md). "
        "Its status is recorded by `recalc_queue_sensor` whenever it changed (every 10 s at most) and by "
        "every run of the `recalc_runbook` job: rows queued, due, held by a running import, poison, the "
        "next DueAt and the oldest rows, due or not, with their projects' names, states and DueAt."
    ),
    group_name="recalc",
    kinds={"postgres"},
    metadata={
        TABLE_NAME_KEY: table_name(project_recalc_requests),
    },
)


class RunbookStep(Enum):
    """What the run does (docs/project-aggregates-recalc.md#runbook)."""

    FORCE_RECALC = "force_recalc"
    RESET_POISON = "reset_poison"
    AUDIT = "audit"
    STATUS = "status"


class RecalcRunbookConfig(dg.Config):
    step: RunbookStep = Field(
        default=RunbookStep.STATUS,
        description=(
            "FORCE_RECALC: enqueue a recalc of the project (runbook 'force recalc', also the fix for "
            "drift). RESET_POISON: AttemptCount = 0, DueAt = now for the project's poison row, once its "
            "LastError is understood and fixed. AUDIT: every stored aggregate that differs from "
            "count/min/max (the run fails on drift). STATUS: only record the queue's status."
        ),
    )
    project: str | None = Field(
        default=None,
        description=(
            "The project: its Talent id, its PIN id or its name (exact, case-insensitive). Required by "
            "FORCE_RECALC and RESET_POISON; AUDIT: this project only (empty: every live project)."
        ),
    )
    due_now: bool = Field(
        default=True,
        description=(
            "FORCE_RECALC: DueAt = now, the drain takes the row within seconds. False: the debounced "
            "request (DueAt = now + CHESSBOARD_RECALC_DEBOUNCE_SECONDS, within the starvation cap)."
        ),
    )


_CAPITAL = re.compile("[A-Z]")


def status_metadata(status: RecalcStatus) -> dict[str, dg.MetadataValue]:
    return {
        # first: the status is a reading, as of this time (a row "waiting" then may be drained since)
        **({"read_at": dg.MetadataValue.text(_utc(status.read_at))} if status.read_at else {}),
        # the figures under snake_case names (queueDepth -> queue_depth)
        **{
            _CAPITAL.sub(lambda m: "_" + m.group().lower(), name): (
                dg.MetadataValue.text(value) if isinstance(value, str) else dg.MetadataValue.int(value)
            )
            for name, value in status.figures().items()
        },
        "oldest_rows": oldest_rows_table(status),
    }


# the columns an operator reads first come first (the table is wider than the page)
OLDEST_ROWS_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("project", "string", description="the project's name"),
        dg.TableColumn(
            "state",
            "string",
            description="as of read_at: due, waiting (DueAt ahead), held (by a Running import run) or poison",
        ),
        dg.TableColumn("due_at", "string", description="DueAt, UTC"),
        dg.TableColumn(
            "due_in_s", "int", description="seconds from read_at to DueAt (negative: overdue at read_at)"
        ),
        dg.TableColumn("attempts", "int", description="AttemptCount"),
        dg.TableColumn("last_error", "string", description="LastError (first 120 characters)"),
        dg.TableColumn("requests", "int", description="RequestedCount (coalesced requests)"),
        dg.TableColumn("reason", "string", description="LastReason"),
        dg.TableColumn("project_id", "string", description="PIN id"),
    ]
)


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def oldest_rows_table(status: RecalcStatus) -> dg.TableMetadataValue:
    """The rows with the earliest DueAt, due or not, as a table (drawn in line on the asset's page,
    unlike markdown)."""
    return dg.MetadataValue.table(
        records=[
            dg.TableRecord(
                {
                    "project": row.name or "(not in the store)",
                    "project_id": str(row.project_id),
                    "due_at": row.due_at.isoformat(timespec="seconds"),
                    **(
                        {"due_in_s": round((row.due_at - status.read_at).total_seconds())}
                        if status.read_at
                        else {}
                    ),
                    "state": row.state,
                    "attempts": row.attempt_count,
                    "requests": row.requested_count,
                    "reason": row.last_reason,
                    "last_error": (row.last_error or "").replace("\n", " ")[:120],
                }
            )
            for row in status.oldest
        ],
        schema=OLDEST_ROWS_SCHEMA,
    )


def _row_metadata(project: ProjectRef, row: dict[str, Any]) -> dict[str, dg.MetadataValue]:
    return {
        "project": dg.MetadataValue.text(project.name),
        "project_id": dg.MetadataValue.text(str(project.id)),
        "talent_id": dg.MetadataValue.text(str(project.talent_id)),
        "due_at": dg.MetadataValue.text(row["due_at"].isoformat(timespec="seconds")),
        "attempt_count": dg.MetadataValue.int(row["attempt_count"]),
        "requested_count": dg.MetadataValue.int(row["requested_count"]),
        "last_error": dg.MetadataValue.text(row["last_error"] or "-"),
    }


def _divergences_markdown(divergences: list[Divergence]) -> str:
    if not divergences:
        return "No divergence."
    lines = ["| entity | id | project | field | stored | expected |", "|---|---|---|---|---|---|"]
    for d in divergences[:AUDIT_SAMPLE]:
        lines.append(f"| {d.entity} | {d.id} | {d.project_id} | {d.field} | {d.stored} | {d.expected} |")
    return "\n".join(lines)


def _project(config: RecalcRunbookConfig, chessboard: ChessboardResource) -> ProjectRef:
    if not config.project:
        raise dg.Failure(description=f"{config.step.name} needs a project: its Talent id, PIN id or name")
    with chessboard.engine.connect() as conn:
        return find_project(conn, config.project)


def _force_recalc(
    context: dg.OpExecutionContext, config: RecalcRunbookConfig, chessboard: ChessboardResource
) -> dict[str, dg.MetadataValue]:
    settings = chessboard.settings
    project = _project(config, chessboard)
    with chessboard.engine.begin() as conn:
        row = request_recalc(
            conn,
            project.id,
            now=config.due_now,
            **settings.recalc_timing,
        )
    due_at = row["due_at"].isoformat(timespec="seconds")
    _log_change(context, "recalc-requested", project, DueAt=due_at, RequestedCount=row["requested_count"])
    return _row_metadata(project, row)


def _log_change(context: dg.OpExecutionContext, event: str, project: ProjectRef, **fields: Any) -> None:
    """A step's one line about the project it changed, under the run's CorrelationId."""
    named = {"ProjectId": project.id, "Project": project.name}
    log_event(context.log, logging.INFO, event, **named, **fields, CorrelationId=context.run_id)


def _nothing_to_reset(typed: str | None, queued: dict[str, Any] | None, poison_attempts: int) -> str:
    """RESET_POISON's one line when it finds nothing to do, naming the project as the operator typed it."""
    if queued is None:
        return f"RESET_POISON: nothing to reset, project {typed!r} has no recalc request"
    return (
        f"RESET_POISON: nothing to reset, the recalc request of project {typed!r} is not poison "
        f"(AttemptCount {queued['attempt_count']} of {poison_attempts}); FORCE_RECALC makes it due now"
    )


def _reset_poison(
    context: dg.OpExecutionContext, config: RecalcRunbookConfig, chessboard: ChessboardResource
) -> dict[str, dg.MetadataValue]:
    project = _project(config, chessboard)
    poison_attempts = chessboard.settings.recalc_poison_attempts
    with chessboard.engine.begin() as conn:
        before = queue_row(conn, project.id)
        row = None
        if before is not None and before["attempt_count"] >= poison_attempts:
            try:
                reset_poison(conn, project.id)
                row = queue_row(conn, project.id)
            except Refused:  # drained meanwhile: nothing left to reset
                before = None
    if row is None or before is None:  # nothing queued or nothing poison: a no-op, one line, not a failure
        context.log.info(_nothing_to_reset(config.project, before, poison_attempts))
        return {
            "project": dg.MetadataValue.text(project.name),
            "project_id": dg.MetadataValue.text(str(project.id)),
            "reset": dg.MetadataValue.bool(False),
        }
    last_error = before["last_error"] or "-"
    _log_change(
        context, "recalc-poison-reset", project, AttemptCount=before["attempt_count"], LastError=last_error
    )
    return {
        **_row_metadata(project, row),
        "attempt_count_before": dg.MetadataValue.int(before["attempt_count"]),
    }


def _audit(
    context: dg.OpExecutionContext, config: RecalcRunbookConfig, chessboard: ChessboardResource
) -> dict[str, dg.MetadataValue]:
    project = _project(config, chessboard) if config.project else None
    with chessboard.engine.connect() as conn:
        found = audit(conn, None if project is None else project.id)
    drifted = drift(found)
    pending = [d for d in found if d.pending]
    scope = "all live projects" if project is None else project.line()
    log_event(
        context.log,
        logging.WARNING if drifted else logging.INFO,
        "recalc-audit",
        Scope=scope,
        Divergences=len(drifted),
        Pending=len(pending),
        PendingProjects=len({d.project_id for d in pending}),
        CorrelationId=context.run_id,
    )
    for divergence in drifted[:AUDIT_SAMPLE]:
        context.log.warning(divergence.line())
    metadata: dict[str, dg.MetadataValue] = {
        "scope": dg.MetadataValue.text(scope),
        "divergences": dg.MetadataValue.int(len(drifted)),
        "pending": dg.MetadataValue.int(len(pending)),
        "projects_with_divergences": dg.MetadataValue.int(len({d.project_id for d in drifted})),
        "sample": dg.MetadataValue.md(_divergences_markdown(drifted)),
    }
    if drifted:
        # as `recalc audit` exits 1: drift is a finding the operator acts on (FORCE_RECALC fixes it)
        raise dg.Failure(
            description=f"{len(drifted)} divergence(s) in {scope}; FORCE_RECALC of the project fixes them",
            metadata=metadata,
        )
    return metadata


_STEPS = {
    RunbookStep.FORCE_RECALC: _force_recalc,
    RunbookStep.RESET_POISON: _reset_poison,
    RunbookStep.AUDIT: _audit,
}


@dg.op(name=OP_NAME, out=dg.Out(dg.Nothing))
def recalc_runbook_step(
    context: dg.OpExecutionContext, config: RecalcRunbookConfig, chessboard: ChessboardResource
) -> Iterator[dg.AssetMaterialization | dg.Output]:
    """Runs the configured runbook step, then records the queue's status on `recalc_queue`, also
    when the step failed (yielded, not logged: a failed step keeps what it yielded)."""
    metadata: dict[str, dg.MetadataValue] = {}
    failure: dg.Failure | None = None
    try:
        step = _STEPS.get(config.step)
        if step is not None:
            metadata = step(context, config, chessboard)
    except ChessboardError as error:
        failure = dg.Failure(description=error.line())
    except dg.Failure as error:
        failure = error
    yield _status_materialization(context, chessboard)
    if failure is not None:
        raise failure
    yield dg.Output(None, metadata={"step": dg.MetadataValue.text(config.step.name), **metadata})


def _status_materialization(
    context: dg.OpExecutionContext, chessboard: ChessboardResource
) -> dg.AssetMaterialization:
    with chessboard.engine.connect() as conn:
        status = recalc_status(conn, chessboard.settings.recalc_poison_attempts)
    log_event(context.log, logging.INFO, "recalc-status", **counter_fields(status.figures()))
    return dg.AssetMaterialization(asset_key=STATUS_ASSET, metadata=status_metadata(status))


QUEUE_SENSOR = "recalc_queue_sensor"
QUEUE_SENSOR_SECONDS = 10


@running_sensor(QUEUE_SENSOR, QUEUE_SENSOR_SECONDS)
def recalc_queue_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource) -> SensorTick:
    """Every 10 s: records the recalc queue's status on `recalc_queue` when it changed (depth, due,
    held, poison, next DueAt, the oldest rows due or not); no run."""
    with chessboard.engine.connect() as conn:
        status = recalc_status(conn, chessboard.settings.recalc_poison_attempts)
    fingerprint = status_fingerprint(status)
    if fingerprint == context.cursor:
        return dg.SkipReason(f"the queue's status is unchanged: {status.queue.depth} row(s) queued")
    return dg.SensorResult(
        asset_events=[dg.AssetMaterialization(asset_key=STATUS_ASSET, metadata=status_metadata(status))],
        cursor=fingerprint,
    )


recalc_runbook = one_op_job(
    JOB_NAME,
    recalc_runbook_step,
    (
        "The recalc runbook by clicks: force recalc, reset poison or audit one project (by Talent id, "
        "PIN id or name), or all; every run records the queue's status on recalc_queue."
    ),
)


def definitions() -> dg.Definitions:
    return dg.Definitions(assets=[RECALC_QUEUE], jobs=[recalc_runbook], sensors=[recalc_queue_sensor])

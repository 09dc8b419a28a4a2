"""The `talent_replay_failed` job: quarantined items read again from Talent and applied
(talent_import/replay_failed.py); the launchpad's config names the import run (by its id or a
Dagster run id of it; empty: every run's). A name that matches no import run, or a run with nothing
quarantined, fails the run in one line; after a replay the stages' `no_quarantined_items` checks
are evaluated again."""

import logging
import uuid

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.declare import one_op_job
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.checks import quarantine_evaluations
from pin_chessboard_pipelines.defs.talent_import.config import SINGLETON_TAGS
from pin_chessboard_pipelines.errors import (
    IMPORT_INVALID_REQUEST,
    ChessboardError,
    Refused,
    TalentSourceError,
    error_line,
)
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.talent.client import TalentApiClient
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.replay_failed import replay_failed
from pin_chessboard_pipelines.talent_import.sources import api_client_options

REPLAY_JOB = "talent_replay_failed"
REPLAY_OP = "replay_failed_items"


ALL_RUNS = ""  # the launchpad's default: every import run's quarantined items


class ReplayFailedConfig(dg.Config):
    run_id: str = Field(
        default=ALL_RUNS,
        description="the import whose quarantined items to replay: the Dagster run id the UI shows "
        "(Runs, the check's import run) or the import run id (`import_run_id` of the stage's "
        "materialization); empty: every import run's",
    )


def _named_run(context: dg.OpExecutionContext, chessboard: ChessboardResource, given: str) -> uuid.UUID:
    """The import run `given` names (its id, or a Dagster run id of it: a re-execution's root run
    is the import's correlation id); Refused in one line when it names none."""
    try:
        uuid.UUID(given)
    except ValueError:
        raise Refused(
            f"run_id {given!r} is not a run id (a Dagster run id or an import run id, a UUID)",
            IMPORT_INVALID_REQUEST,
        ) from None
    ids = [given]
    dagster_run = context.instance.get_run_by_id(given)
    if dagster_run is not None and dagster_run.root_run_id:
        ids.append(dagster_run.root_run_id)
    with chessboard.engine.connect() as conn:
        row = runs.import_run_named(conn, ids)
        quarantined = 0 if row is None else sum(r["items"] for r in runs.failed_items_of_run(conn, row["id"]))
    if row is None:
        raise Refused(
            f"nothing to replay: no import run has the id {given} (neither an import run id nor a "
            "Dagster run id of an import)",
            IMPORT_INVALID_REQUEST,
        )
    if not quarantined:
        raise Refused(
            f"nothing to replay: import run {row['id']} (Dagster run {row['dagster_run_id']}) has no "
            "quarantined item",
            IMPORT_INVALID_REQUEST,
        )
    context.log.info(
        f"replaying the {quarantined} quarantined item(s) of import run {row['id']} "
        f"(named {given}, Dagster run {row['dagster_run_id']})"
    )
    return row["id"]


@dg.op(name=REPLAY_OP, out=dg.Out(dg.Nothing))
def replay_failed_items(
    context: dg.OpExecutionContext, config: ReplayFailedConfig, chessboard: ChessboardResource
) -> dg.Output:
    settings = chessboard.settings
    try:
        require_talent_sync_enabled(settings)
        given = config.run_id.strip()
        run_id = _named_run(context, chessboard, given) if given else None
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    client = TalentApiClient(
        settings.talent_api_url, settings.talent_api_token, **api_client_options(settings)
    )
    try:
        result = replay_failed(
            chessboard.engine,
            client,
            run_id=run_id,
            correlation_id=context.run_id,
            **settings.recalc_timing,
            lock_timeout_seconds=settings.import_lock_timeout_seconds,
            url=chessboard.url,
            page_size=settings.import_page_size,
        )
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    except TalentSourceError as error:
        raise dg.Failure(description=f"Talent: {error_line(error)}") from None
    finally:
        client.close()
    for evaluation in quarantine_evaluations(context.instance, chessboard.engine, run_id, context.run_id):
        context.log_event(evaluation)  # type: ignore[arg-type]
    if result.removed:
        chessboard.relay_outbox(context)
    summary = result.to_dict()
    stages = {
        stage: "/".join(f"{name}:{value}" for name, value in counters.items())
        for stage, counters in summary.get("stages", {}).items()
        if any(counters.values())
    }
    fields = {key[:1].upper() + key[1:]: value for key, value in summary.items() if key != "stages"}
    metadata = {"summary": dg.MetadataValue.json(summary)}
    if result.error:  # the pages that applied stay applied; the failed ones stay quarantined
        log_event(context.log, logging.ERROR, "replay-failed-failed", **fields, **stages)
        raise dg.Failure(description=result.error, metadata=metadata)
    log_event(context.log, logging.INFO, "replay-failed-completed", **fields, **stages)
    return dg.Output(None, metadata=metadata)


talent_replay_failed = one_op_job(
    REPLAY_JOB,
    replay_failed_items,
    "Quarantined items read again from Talent by id and applied; the rows that applied leave the quarantine",
    tags=SINGLETON_TAGS,
    # the launchpad opens with the one field and its default, its description beside it
    config={"ops": {REPLAY_OP: {"config": {"run_id": ALL_RUNS}}}},
)

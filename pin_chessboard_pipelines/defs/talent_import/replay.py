"""The `talent_replay_failed` job: quarantined items read again from Talent and applied
(talent_import/replay_failed.py); the launchpad's config names the import run (or none: all)."""

import logging
import uuid

import dagster as dg
from pydantic import Field

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.config import SINGLETON_TAGS
from pin_chessboard_pipelines.errors import ChessboardError, TalentSourceError, error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.talent.client import TalentApiClient
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import.replay_failed import replay_failed
from pin_chessboard_pipelines.talent_import.sources import api_client_options

REPLAY_JOB = "talent_replay_failed"
REPLAY_OP = "replay_failed_items"


class ReplayFailedConfig(dg.Config):
    run_id: str | None = Field(
        default=None, description="the import run whose quarantined items to replay (default: every run's)"
    )


@dg.op(name=REPLAY_OP, out=dg.Out(dg.Nothing))
def replay_failed_items(
    context: dg.OpExecutionContext, config: ReplayFailedConfig, chessboard: ChessboardResource
) -> dg.Output:
    settings = chessboard.settings
    try:
        require_talent_sync_enabled(settings)
        run_id = uuid.UUID(config.run_id) if config.run_id else None
    except (ChessboardError, ValueError) as error:
        raise dg.Failure(description=error_line(error)) from None
    client = TalentApiClient(
        settings.talent_api_url, settings.talent_api_token, **api_client_options(settings)
    )
    try:
        result = replay_failed(
            chessboard.engine,
            client,
            run_id=run_id,
            correlation_id=context.run_id,
            debounce_seconds=settings.recalc_debounce_seconds,
            cap_seconds=settings.recalc_cap_seconds,
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


@dg.job(
    name=REPLAY_JOB,
    description="Quarantined items read again from Talent by id and applied; the rows that applied leave "
    "the quarantine",
    tags=SINGLETON_TAGS,
    executor_def=dg.in_process_executor,
)
def talent_replay_failed() -> None:
    replay_failed_items()

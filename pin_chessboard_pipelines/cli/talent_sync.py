"""`pin-chessboard talent-sync [--until-idle]` (README.md#commands): the streaming consumer."""

from __future__ import annotations

import argparse

from pin_chessboard_pipelines.cli.arguments import add_consumer_parser, consumer_job_config
from pin_chessboard_pipelines.errors import Refused

HELP = "streaming consumer of the Talent topics (the sync job, Dagster; Ctrl-C stops)"
UNTIL_IDLE_HELP = "stop once every partition is caught up"


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    add_consumer_parser(subparsers, "talent-sync", HELP, UNTIL_IDLE_HELP, _sync)


def _sync(args: argparse.Namespace) -> int:
    """Refusals (flag off, another consumer, topics missing) first, then the job through the Dagster
    instance in DAGSTER_HOME, so the run shows in the UI."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.talent_sync.definitions import JOB_NAME, OP_NAME
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.settings import load_settings
    from pin_chessboard_pipelines.store.engine import get_engine
    from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
    from pin_chessboard_pipelines.talent.topic_reader import check_topics, sync_running
    from pin_chessboard_pipelines.talent_sync import SYNC_LOCK_HELD

    settings = load_settings()
    require_talent_sync_enabled(settings)
    if sync_running(get_engine(database_url(settings))):
        raise Refused("another talent-sync consumer is running", SYNC_LOCK_HELD)
    check_topics(settings.kafka_bootstrap_servers)
    return run_job(JOB_NAME, OP_NAME, consumer_job_config(args), settings)

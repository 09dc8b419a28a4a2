"""`pin-chessboard handbook-sync [--until-idle] [--time-budget S]` (README.md#commands): the
consumer of the handbook topics and the republish of renamed regions / cities."""

from __future__ import annotations

import argparse

from pin_chessboard_pipelines.cli.arguments import add_consumer_parser, consumer_job_config
from pin_chessboard_pipelines.errors import SYNC_LOCK_HELD, Refused

HELP = "consumer of the handbook topics; republishes the projects of a renamed region or city"
UNTIL_IDLE_HELP = "stop once both topics are caught up and nothing is pending"


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    add_consumer_parser(subparsers, "handbook-sync", HELP, UNTIL_IDLE_HELP, _sync)


def _sync(args: argparse.Namespace) -> int:
    """Refusals (another consumer, topics missing) first, then the job through the Dagster instance
    in DAGSTER_HOME, so the run shows in the UI."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.handbook_sync.definitions import JOB_NAME, OP_NAME
    from pin_chessboard_pipelines.handbook_sync import check_handbook_topics, handbook_sync_running
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.settings import load_settings
    from pin_chessboard_pipelines.store.engine import get_engine

    settings = load_settings()
    if handbook_sync_running(get_engine(database_url(settings))):
        raise Refused("another handbook-sync consumer is running", SYNC_LOCK_HELD)
    check_handbook_topics(settings.kafka_bootstrap_servers)
    return run_job(JOB_NAME, OP_NAME, consumer_job_config(args), settings)

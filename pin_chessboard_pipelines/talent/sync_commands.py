"""`pin-chessboard talent-sync [--until-idle]` (operations.md, "Commands"): the streaming consumer."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK, IMPORT_DISABLED, Refused


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    sync = subparsers.add_parser(
        "talent-sync", help="streaming consumer of the Talent topics (the sync job, Dagster; Ctrl-C stops)"
    )
    sync.add_argument("--until-idle", action="store_true", help="stop once every partition is caught up")
    sync.add_argument(
        "--time-budget",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="stop after this long (default: never)",
    )
    sync.set_defaults(func=_sync)


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a positive number of seconds")
    return value


def _sync(args: argparse.Namespace) -> int:
    """Refusals (flag off, another consumer, topics missing) first, then the job through the Dagster
    instance in DAGSTER_HOME, so the run shows in the UI."""
    import dagster as dg

    from pin_chessboard_pipelines.defs.talent_sync.definitions import JOB_NAME, OP_NAME
    from pin_chessboard_pipelines.runtime.services import database_url, prepare_dagster_home
    from pin_chessboard_pipelines.settings import load_settings
    from pin_chessboard_pipelines.store.engine import get_engine
    from pin_chessboard_pipelines.talent.sync import SYNC_LOCK_HELD, check_topics, sync_running

    settings = load_settings()
    if not settings.talent_sync_enabled:
        raise Refused("feature flag chessboard.talent-sync.enabled is off", IMPORT_DISABLED)
    if sync_running(get_engine(database_url(settings))):
        raise Refused("another talent-sync consumer is running", SYNC_LOCK_HELD)
    check_topics(settings.kafka_bootstrap_servers)
    prepare_dagster_home(settings)
    from pin_chessboard_pipelines.definitions import build_definitions

    job = build_definitions().resolve_job_def(JOB_NAME)
    config = {"until_idle": bool(args.until_idle), "time_budget_seconds": args.time_budget}
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance,
            run_config={"ops": {OP_NAME: {"config": config}}},
            tags={"pin/trigger": "cli"},
            raise_on_error=False,
        )
        summary = _summary(result, OP_NAME)
    print(
        json.dumps(
            {"runId": result.run_id, "status": "Completed" if result.success else "Failed", **summary},
            ensure_ascii=False,
        )
    )
    return EXIT_OK if result.success else EXIT_FAILED


def _summary(result: Any, op_name: str) -> dict[str, Any]:
    for event in result.events_for_node(op_name):
        if event.is_successful_output:
            summary = event.step_output_data.metadata.get("summary")
            if summary is not None:
                return dict(summary.value)
        elif event.is_step_failure:
            return {"error": event.step_failure_data.error.message.strip().splitlines()[0]}
    return {}

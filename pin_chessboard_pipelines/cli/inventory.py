"""`pin-chessboard inventory [--day YYYY-MM-DD]` (README.md#commands): one day of
`project_inventory_daily` materialized through the Dagster instance in DAGSTER_HOME, as the
schedule or the UI's "Materialize" would (a run of `project_inventory_daily_job` for that day's
partition, in the UI's history). The last line of stdout is {runId, status, day, …the day's
figures}; exit 0 materialized, 1 failed (its cause the last line of stderr), 2 an invalid day."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, date, datetime
from typing import Any

from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK

# the materialization's figures the command prints (defs/metadata.py describes them)
FIGURES = ("projects", "free_objects", "total_objects", "free_value_exact", "as_of_source")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inventory",
        help="materialize one day of project_inventory_daily through Dagster (default: today, UTC)",
    )
    parser.add_argument(
        "--day",
        type=day_argument,
        default=None,
        metavar="YYYY-MM-DD",
        help="the day's partition (default: today, UTC: the replica as it is now)",
    )
    parser.set_defaults(func=inventory_command)


def day_argument(raw: str) -> str:
    """argparse type of `--day`: an ISO date, returned as the partition key."""
    try:
        return date.fromisoformat(raw).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a day (YYYY-MM-DD)") from None


def inventory_command(args: argparse.Namespace) -> int:
    import dagster as dg

    from pin_chessboard_pipelines.cli.jobs import CONSOLE_LOGGER, execute_as_launched
    from pin_chessboard_pipelines.defs.analytics.definitions import ASSET_KEY, JOB_NAME, PARTITIONS
    from pin_chessboard_pipelines.defs.pools import ensure_pools
    from pin_chessboard_pipelines.defs.singleton import NO_RUN_RETRIES
    from pin_chessboard_pipelines.errors import Refused
    from pin_chessboard_pipelines.runtime.services import prepare_dagster_home
    from pin_chessboard_pipelines.settings import load_settings

    day = args.day or datetime.now(UTC).date().isoformat()
    if not PARTITIONS.has_partition_key(day):
        first = PARTITIONS.get_first_partition_key()
        raise Refused(f"--day {day}: project_inventory_daily has the days {first} .. today (UTC)")
    prepare_dagster_home(load_settings())
    with dg.DagsterInstance.get() as instance:
        ensure_pools(instance)  # the inventory's pool, before its step asks for a slot
        result = execute_as_launched(
            instance,
            JOB_NAME,
            run_config=CONSOLE_LOGGER,
            tags={"dagster/partition": day, "pin/trigger": "cli", **NO_RUN_RETRIES},
        )
    summary: dict[str, Any] = {"runId": result.run_id, "status": "Completed" if result.success else "Failed"}
    summary["day"] = day
    for event in result.all_events:
        if event.event_type_value == "ASSET_MATERIALIZATION" and event.asset_key == ASSET_KEY:
            metadata = event.event_specific_data.materialization.metadata
            summary.update({name: metadata[name].value for name in FIGURES if name in metadata})
    print(json.dumps(summary, ensure_ascii=False, default=str), flush=True)
    if result.success:
        return EXIT_OK
    failures = [e.step_failure_data for e in result.all_events if e.is_step_failure]
    cause = next(
        (f.user_failure_data.description for f in failures if f.user_failure_data is not None),
        f"see the run {result.run_id}",
    )
    print(f"inventory {day} failed: {cause}", file=sys.stderr)  # the last line of stderr: the cause
    return EXIT_FAILED

"""`pin-chessboard outbox relay [--until-empty]` (operations.md, "Commands")."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK

UNTIL_EMPTY_BUDGET_SECONDS = 600.0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    outbox = subparsers.add_parser("outbox", help="the transactional outbox")
    commands = outbox.add_subparsers(dest="outbox_command", required=True)
    relay = commands.add_parser("relay", help="publish pending outbox rows to Kafka (the relay job, Dagster)")
    relay.add_argument(
        "--until-empty",
        action="store_true",
        help="keep publishing (and wait for a busy relay) until no pending row is left",
    )
    relay.add_argument(
        "--time-budget",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help=f"give up after this long, retrying a down broker meanwhile (default 60, {UNTIL_EMPTY_BUDGET_SECONDS:.0f} "
        "with --until-empty)",
    )
    relay.set_defaults(func=_relay)

    events = commands.add_parser(
        "events", help="what is on the pin.chessboard topics: counts and the latest events"
    )
    events.add_argument(
        "--last", type=int, default=5, metavar="N", help="show the N most recent events (default 5)"
    )
    events.set_defaults(func=_events)


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a positive number of seconds")
    return value


def _relay(args: argparse.Namespace) -> int:
    """The relay job through the Dagster instance in DAGSTER_HOME, so the run shows in the UI."""
    import dagster as dg

    from pin_chessboard_pipelines.defs.outbox.definitions import (
        DEFAULT_TIME_BUDGET_SECONDS,
        JOB_NAME,
        OP_NAME,
    )
    from pin_chessboard_pipelines.runtime.services import prepare_dagster_home
    from pin_chessboard_pipelines.settings import load_settings

    prepare_dagster_home(load_settings())
    from pin_chessboard_pipelines.definitions import build_definitions

    budget = args.time_budget or (
        UNTIL_EMPTY_BUDGET_SECONDS if args.until_empty else DEFAULT_TIME_BUDGET_SECONDS
    )
    job = build_definitions().resolve_job_def(JOB_NAME)
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance,
            run_config={
                "ops": {
                    OP_NAME: {
                        "config": {"until_empty": bool(args.until_empty), "time_budget_seconds": budget}
                    }
                }
            },
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


def _events(args: argparse.Namespace) -> int:
    """Messages per pin.chessboard topic and the latest events, as a downstream consumer sees them."""
    from pin_chessboard_pipelines.events.consumer import latest_events, topic_counts
    from pin_chessboard_pipelines.settings import load_settings

    bootstrap = load_settings().kafka_bootstrap_servers
    counts = topic_counts(bootstrap)
    width = max((len(t) for t in counts), default=0)
    for topic, n in counts.items():
        print(f"{topic:<{width}}  {n:>9} messages")
    print(f"{'total':<{width}}  {sum(counts.values()):>9} messages")
    for event in latest_events(bootstrap, last=max(0, args.last)):
        name = event.payload.get("name") or event.payload.get("number") or ""
        print(
            f"{event.headers.get('occurredAt', '')}  {event.event_type}  key={event.key}  "
            f"version={event.payload.get('version')}  {name}".rstrip()
        )
    return EXIT_OK


def _summary(result: Any, op_name: str) -> dict[str, Any]:
    """The op's summary metadata, from its output or from its failure."""
    for event in result.events_for_node(op_name):
        metadata = None
        if event.is_successful_output:
            metadata = event.step_output_data.metadata
        elif event.is_step_failure and event.step_failure_data.user_failure_data is not None:
            metadata = event.step_failure_data.user_failure_data.metadata
            error = event.step_failure_data.user_failure_data.description
            if metadata and "summary" in metadata:
                return {**dict(metadata["summary"].value), "error": error}
            return {"error": error}
        if metadata and "summary" in metadata:
            return dict(metadata["summary"].value)
    return {}

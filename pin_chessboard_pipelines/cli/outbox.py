"""`pin-chessboard outbox relay [--until-empty]` (README.md#commands)."""

from __future__ import annotations

import argparse

from pin_chessboard_pipelines.cli.arguments import add_command_group, add_time_budget, add_until_empty
from pin_chessboard_pipelines.errors import EXIT_OK

UNTIL_EMPTY_BUDGET_SECONDS = 600.0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    commands = add_command_group(subparsers, "outbox", "the transactional outbox")
    relay = commands.add_parser("relay", help="publish pending outbox rows to Kafka (the relay job, Dagster)")
    add_until_empty(relay, "keep publishing (and wait for a busy relay) until no pending row is left")
    add_time_budget(
        relay,
        f"give up after this long, retrying a down broker meanwhile (default 60, {UNTIL_EMPTY_BUDGET_SECONDS:.0f} "
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


def _relay(args: argparse.Namespace) -> int:
    """The relay job through the Dagster instance in DAGSTER_HOME, so the run shows in the UI."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.outbox.definitions import (
        DEFAULT_TIME_BUDGET_SECONDS,
        JOB_NAME,
        OP_NAME,
    )
    from pin_chessboard_pipelines.settings import load_settings

    settings = load_settings()
    budget = args.time_budget or (
        UNTIL_EMPTY_BUDGET_SECONDS if args.until_empty else DEFAULT_TIME_BUDGET_SECONDS
    )
    return run_job(
        JOB_NAME, OP_NAME, {"until_empty": bool(args.until_empty), "time_budget_seconds": budget}, settings
    )


def _events(args: argparse.Namespace) -> int:
    """Messages per pin.chessboard topic and the latest events, as a downstream consumer sees them."""
    from pin_chessboard_pipelines.events.reference_consumer import latest_events, topic_counts
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

"""`pin-chessboard recalc drain|request|reset-poison|status|audit|carry-objects`
(docs/project-aggregates-recalc.md#runbook)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pin_chessboard_pipelines.cli.arguments import add_command_group, add_until_empty, uuid_argument
from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    commands = add_command_group(subparsers, "recalc", "project aggregates recalc (queue, drain, runbook)")

    drain = commands.add_parser("drain", help="drain due recalc rows through the recalc job (Dagster)")
    add_until_empty(drain, "until no due row is left (rows not yet due stay queued)")
    drain.set_defaults(func=_drain)

    request = commands.add_parser("request", help="enqueue a recalc of one project (force recalc)")
    request.add_argument("--project-id", required=True, type=uuid_argument, help="PIN id of the project")
    request.add_argument("--now", action="store_true", help="DueAt = now instead of the debounce")
    request.set_defaults(func=_request)

    reset = commands.add_parser("reset-poison", help="AttemptCount = 0, DueAt = now for one project")
    reset.add_argument("--project-id", required=True, type=uuid_argument, help="PIN id of the project")
    reset.set_defaults(func=_reset_poison)

    status = commands.add_parser("status", help="the recalc queue, optionally until it is drained")
    status.add_argument(
        "--wait",
        type=float,
        metavar="SECONDS",
        help="poll until no row is pending (poison rows aside); exit 1 if still pending after SECONDS",
    )
    status.add_argument(
        "--projects", type=int, default=0, metavar="N", help="also show N projects' aggregates"
    )
    status.set_defaults(func=_status)

    audit = commands.add_parser("audit", help="list aggregate divergences; exit 1 if any")
    audit.add_argument("--project-id", type=uuid_argument, help="PIN id of one project (default: all)")
    audit.set_defaults(func=_audit)

    carry = commands.add_parser(
        "carry-objects",
        help="property objects whose project is not their building's take it (published, both projects requested)",
    )
    carry.set_defaults(func=_carry_objects)


def _store():
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.settings import load_settings
    from pin_chessboard_pipelines.store.engine import get_engine

    settings = load_settings()
    return settings, get_engine(database_url(settings))


def _print_json(value: dict[str, Any]) -> None:
    print(json.dumps(value, default=str, ensure_ascii=False))


def _drain(args: argparse.Namespace) -> int:
    """The recalc job through the Dagster instance in DAGSTER_HOME, so the run shows in the UI."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.recalc.definitions import JOB_NAME, drain_op_names, drain_run_config
    from pin_chessboard_pipelines.settings import load_settings

    drains = load_settings().recalc_drains
    config = {"until_empty": bool(args.until_empty)}
    return run_job(JOB_NAME, drain_op_names(drains), config, run_config=drain_run_config(drains, config))


def _request(args: argparse.Namespace) -> int:
    from pin_chessboard_pipelines.recalc.queue import request_recalc

    settings, engine = _store()
    with engine.begin() as conn:
        row = request_recalc(
            conn,
            args.project_id,
            now=args.now,
            **settings.recalc_timing,
        )
    _print_json(_queue_json(row))
    return EXIT_OK


def _reset_poison(args: argparse.Namespace) -> int:
    from pin_chessboard_pipelines.recalc.queue import queue_row, reset_poison

    _, engine = _store()
    with engine.begin() as conn:
        reset_poison(conn, args.project_id)
        row = queue_row(conn, args.project_id)
    assert row is not None
    _print_json(_queue_json(row))
    return EXIT_OK


def _carry_objects(args: argparse.Namespace) -> int:
    import uuid

    from pin_chessboard_pipelines.replica.repair import carry_left_behind_objects

    settings, engine = _store()
    with engine.begin() as conn:
        carried = carry_left_behind_objects(
            conn,
            correlation_id=f"carry-objects-{uuid.uuid4()}",
            **settings.recalc_timing,
        )
    _print_json({"carriedObjects": carried.objects, "requestedProjects": carried.projects})
    return EXIT_OK


def _queue_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "projectId": str(row["project_id"]),
        "tenantId": str(row["tenant_id"]),
        "dueAt": row["due_at"].isoformat(),
        "firstRequestedAt": row["first_requested_at"].isoformat(),
        "requestedCount": row["requested_count"],
        "lastReason": row["last_reason"],
        "attemptCount": row["attempt_count"],
        "lastError": row["last_error"],
    }


def _status(args: argparse.Namespace) -> int:
    import time

    from pin_chessboard_pipelines.recalc.queue import aggregates_sample, queue_status

    settings, engine = _store()
    poison = settings.recalc_poison_attempts

    def read():
        with engine.connect() as conn:
            return queue_status(conn, poison)

    status = read()
    print(_status_line(status), flush=True)
    code = EXIT_OK
    if args.wait is not None:
        deadline = time.monotonic() + args.wait
        while status.pending and time.monotonic() < deadline:
            time.sleep(0.5)
            current = read()
            if current != status:
                print(_status_line(current), flush=True)
            status = current
        code = EXIT_OK if not status.pending else EXIT_FAILED
    if args.projects > 0:
        with engine.connect() as conn:
            rows = aggregates_sample(conn, args.projects)
        print(
            f"{'project':<40} {'status':<10} {'free/total':>11} {'price min..max':>27} {'layouts':>7} {'v':>3}"
        )
        for row in rows:
            price = "-" if row["price_min"] is None else f"{row['price_min']}..{row['price_max']}"
            print(
                f"{row['name'][:40]:<40} {row['status']:<10} {row['free']:>5}/{row['total']:<5} "
                f"{price:>27} {row['layouts']:>7} {row['version']:>3}"
            )
    _print_json(status.as_dict())
    return code


def _status_line(status) -> str:
    next_due = "-" if status.next_due_at is None else status.next_due_at.isoformat(timespec="seconds")
    return (
        f"recalc queue: {status.depth} row(s), {status.due} due, {status.held} held by an import, "
        f"{status.poison} poison, "
        f"{status.requested} coalesced request(s), next due at {next_due}"
    )


def _audit(args: argparse.Namespace) -> int:
    from pin_chessboard_pipelines.recalc.audit import audit, drift

    _, engine = _store()
    with engine.connect() as conn:
        divergences = audit(conn, args.project_id)
    drifted = drift(divergences)
    pending = [d for d in divergences if d.pending]
    for divergence in drifted + pending:
        print(divergence.line())
    scope = f"project {args.project_id}" if args.project_id else "all live projects"
    projects = len({d.project_id for d in pending})
    # only drift fails the audit: a pending project's recalc is queued (docs/project-aggregates-recalc.md#audit)
    print(f"{len(drifted)} divergence(s) in {scope}; {len(pending)} pending in {projects} queued project(s)")
    return EXIT_FAILED if drifted else EXIT_OK

"""`pin-chessboard import` (README.md#commands, docs/talent-initial-import.md#result).

Refusals first, each one line with its code and exit 2: an invalid request, the flag off, the
source unavailable (TopicReplay included, until its reader exists), the lock held. Then the
developer partitions are discovered and the six assets run as ONE Dagster run through the
instance in DAGSTER_HOME, so the run is in the UI's history. The session (lock + run row) is opened
here and handed to the assets by correlation id (= the Dagster run id). The last line of stdout is
the TalentInitialImportResult JSON; exit 0 Completed, 1 Failed or Cancelled. Ctrl-C cancels after
the current page.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time
import uuid

from pin_chessboard_pipelines.cli.arguments import uuid_argument
from pin_chessboard_pipelines.cli.jobs import CONSOLE_LOGGER
from pin_chessboard_pipelines.defs.executors import concurrent_steps_config
from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK, IMPORT_LOCK_HELD, Refused, error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.retry import Retrier
from pin_chessboard_pipelines.settings import Settings, load_settings
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.request import (
    RunStatus,
    TalentInitialImportRequest,
    build_request,
)
from pin_chessboard_pipelines.talent_import.result import TalentInitialImportResult

log = logging.getLogger("pin_chessboard_pipelines.talent_import")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("import", help="run (or resume) the talent initial import through Dagster")
    parser.add_argument("--mode", default="ApiPull", help="ApiPull (default) or TopicReplay")
    parser.add_argument("--page-size", type=int, help="1..2000 (default CHESSBOARD_IMPORT_PAGE_SIZE)")
    parser.add_argument("--developer-id", help="Talent developer id: re-sync one developer")
    parser.add_argument("--project-id", help="Talent project id: re-sync one project")
    parser.add_argument("--dry-run", action="store_true", help="validate and count only, write nothing")
    parser.add_argument(
        "--workers", type=int, default=2, help="page workers (threads) per process (default 2)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="processes per stage, 1..16 (default 1; OS processes with CHESSBOARD_DAGSTER_EXECUTOR=multiprocess)",
    )
    parser.set_defaults(func=import_command)
    commands = parser.add_subparsers(dest="import_command", required=False, metavar="replay-failed")
    replay = commands.add_parser(
        "replay-failed",
        help="read quarantined items again from Talent and apply them (the talent_replay_failed job)",
    )
    replay.add_argument("--run-id", type=uuid_argument, help="the import run (default: every run's items)")
    replay.set_defaults(func=replay_failed_command)


def replay_failed_command(args: argparse.Namespace) -> int:
    """The replay job through the Dagster instance in DAGSTER_HOME; the last line of stdout is its
    result (a TalentInitialImportResult-like JSON); exit 0 done, 1 failed, 2 refused."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.talent_import.replay import REPLAY_JOB, REPLAY_OP

    settings = load_settings()
    require_talent_sync_enabled(settings)
    return run_job(REPLAY_JOB, REPLAY_OP, {"run_id": str(args.run_id) if args.run_id else ""}, settings)


def request_of(
    args: argparse.Namespace, settings: Settings, correlation_id: str
) -> TalentInitialImportRequest:
    return build_request(
        mode=args.mode,
        developer_ids=[args.developer_id] if args.developer_id else [],
        project_id=args.project_id,
        page_size=args.page_size if args.page_size is not None else settings.import_page_size,
        dry_run=args.dry_run,
        correlation_id=correlation_id,
        workers=args.workers,
        processes=args.processes,
    )


def import_command(args: argparse.Namespace) -> int:
    settings = load_settings()
    run_id = str(uuid.uuid4())  # the Dagster run id, and so the CorrelationId
    request = request_of(args, settings, run_id)
    require_talent_sync_enabled(settings)  # before DAGSTER_HOME or the embedded database is touched
    result = run_import_command(settings, request, run_id)
    print(result.to_json(), flush=True)
    if result.status == RunStatus.COMPLETED:
        return EXIT_OK
    # the last line of stderr: how the run ended and why, once
    print(f"import {result.run_id} {result.status}: {_error_of(settings, result)}", file=sys.stderr)
    return EXIT_FAILED


def _error_of(settings: Settings, result: TalentInitialImportResult) -> str:
    from pin_chessboard_pipelines.runtime.services import database_url
    from pin_chessboard_pipelines.store.engine import get_engine

    try:
        with get_engine(database_url(settings)).connect() as conn:
            row = runs.get_run(conn, uuid.UUID(result.run_id))
    except Exception as error:
        return f"(the run's error could not be read: {error_line(error)})"
    recorded = row["error"] if row is not None else None
    return str(recorded or "no error recorded")


def run_import_command(
    settings: Settings, request: TalentInitialImportRequest, run_id: str
) -> TalentInitialImportResult:
    # Dagster is imported here: `pin-chessboard --help` stays fast.
    import dagster as dg

    from pin_chessboard_pipelines.cli.jobs import execute_as_launched
    from pin_chessboard_pipelines.defs.pools import ensure_pools
    from pin_chessboard_pipelines.defs.singleton import NO_RUN_RETRIES
    from pin_chessboard_pipelines.defs.talent_import.config import IMPORT_JOB, PARTITIONS, TalentImportConfig
    from pin_chessboard_pipelines.defs.talent_import.partitions import (
        add_developer_partitions,
        frozen_partition_keys,
    )
    from pin_chessboard_pipelines.defs.talent_import.pool import (
        fail_runs_of_gone_imports,
        wait_for_import_pool,
    )
    from pin_chessboard_pipelines.defs.talent_import.session import build_session
    from pin_chessboard_pipelines.runtime.services import database_url, prepare_dagster_home
    from pin_chessboard_pipelines.talent_import.progress import ProgressBar

    prepare_dagster_home(settings)
    instance = dg.DagsterInstance.get()
    # Outside the run queue: wait for an import run that holds the pool, then for the advisory
    # lock, within one CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS (docs/talent-initial-import.md#advisory-lock).
    started = time.monotonic()
    ensure_pools(instance)
    fail_runs_of_gone_imports(  # a killed import's run is not running; its held requests are released
        instance,
        database_url(settings),
        debounce_seconds=settings.recalc_debounce_seconds,
        cap_seconds=settings.recalc_cap_seconds,
    )
    holding = wait_for_import_pool(instance, settings.import_lock_timeout_seconds)
    if holding:
        raise Refused(
            f"another import is running: Dagster run {holding[0].run_id} ({holding[0].status.value})"
            f" still holds the import pool after {settings.import_lock_timeout_seconds:g}s",
            IMPORT_LOCK_HELD,
        )
    remaining = max(0.0, settings.import_lock_timeout_seconds - (time.monotonic() - started))
    settings = dataclasses.replace(settings, import_lock_timeout_seconds=remaining)
    config = TalentImportConfig(
        mode=request.mode.value,  # type: ignore[arg-type]
        page_size=request.page_size,
        project_id_filter=request.project_id,
        dry_run=request.dry_run,
        workers=request.workers,
        processes=request.processes,
    )
    # Source availability, the lock (held by this process until the import ends) and the run row:
    # refusals happen here, before Dagster starts. The run's steps join that row.
    session = build_session(
        settings,
        database_url(settings),
        config,
        correlation_id=run_id,
        developer_ids=list(request.developer_ids),  # none: every developer, listed without a filter
        dagster_run_id=run_id,
    )
    try:
        session.open()
    except BaseException:
        session.close()
        raise
    cause: str | None = None  # why the import stopped, when it stopped before its last stage
    try:
        # The partitions of the run: the filtered developer, the project's developer, or all of them.
        developers = session.source.developers(request.project_id)
        if request.developer_ids:
            wanted = request.developer_ids[0].lower()
            names = {developer_id.lower(): name for developer_id, name in developers}
            developers = [(request.developer_ids[0], names.get(wanted, ""))]
        add_developer_partitions(instance, session.engine, developers)
        if request.developer_ids or request.project_id:
            frozen = frozen_partition_keys(
                session.engine, developers[:1], instance.get_dynamic_partitions(PARTITIONS)
            )
            selected = list(frozen.values())
        else:
            selected = list(instance.get_dynamic_partitions(PARTITIONS))
        if not selected:
            # Nothing to partition by (an empty source, or a project Talent does not list): the same
            # import, without a Dagster run.
            log.info("no developer partition to run: importing without a Dagster run")
            return session.run_stages()
        with ProgressBar(session.engine, session.run_id):
            executed = execute_as_launched(
                instance,
                IMPORT_JOB,
                run_id=run_id,
                run_config={
                    **CONSOLE_LOGGER,
                    "resources": {"talent_import": {"config": config.model_dump(exclude_none=True)}},
                    **concurrent_steps_config(config.processes),
                },
                tags={
                    "dagster/asset_partition_range_start": selected[0],
                    "dagster/asset_partition_range_end": selected[-1],
                    "pin/trigger": "cli",
                    # this process is the run worker: a killed command is resumed by running it
                    # again, not by the daemon's retry beside it (docs/deployment.md#run-retries)
                    **NO_RUN_RETRIES,
                },
            )
        if not executed.success:
            cause = _failure_of(executed)
    except KeyboardInterrupt:
        session.end(RunStatus.CANCELLED, "interrupted")
        session.close()
        raise
    except Exception as error:  # before or around the Dagster run: the cause is the run's error
        cause = error_line(error)
        log_event(log, logging.ERROR, "import-failed", RunId=session.run_id, Error=repr(cause))
    # The last stage's barrier completes the run; an import that stopped before ends here.
    session.end(
        RunStatus.CANCELLED if _cancelled(instance, run_id) else RunStatus.FAILED,
        cause or "the import stopped before its last stage",
    )
    session.close()

    def read() -> runs.Row | None:
        with session.engine.connect() as conn:
            return runs.get_run(conn, session.run_id)

    row = Retrier(settings.import_page_retry_seconds)("read the import result", read)
    assert row is not None
    return runs.result_of(row)


def _cancelled(instance, run_id: str) -> bool:
    import dagster as dg

    if instance is None:
        return False
    try:
        dagster_run = instance.get_run_by_id(run_id)
    except Exception:  # Dagster's storage unreachable: the run did not end by a cancel we can see
        return False
    return dagster_run is not None and dagster_run.status == dg.DagsterRunStatus.CANCELED


def _failure_of(executed) -> str | None:
    """The first step failure's one-line description, if any."""
    for event in executed.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            failure = event.step_failure_data
            if failure.user_failure_data is not None and failure.user_failure_data.description:
                return failure.user_failure_data.description.splitlines()[0]
            if failure.error is not None:
                return failure.error.message.strip().splitlines()[0]
    return None

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
import logging
import sys
import uuid

from pin_chessboard_pipelines.cli.arguments import uuid_argument
from pin_chessboard_pipelines.cli.jobs import CONSOLE_LOGGER
from pin_chessboard_pipelines.errors import EXIT_FAILED, EXIT_OK, error_line
from pin_chessboard_pipelines.settings import Settings, load_settings
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.request import (
    RunStatus,
)
from pin_chessboard_pipelines.talent_import.result import TalentInitialImportResult

log = logging.getLogger("pin_chessboard_pipelines.talent_import")
# the launchpad's fields (TalentImportConfig) the command's options set, each under its own name
CONFIG_OPTIONS = ("mode", "page_size", "project_id_filter", "dry_run", "workers", "processes")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("import", help="run (or resume) the talent initial import through Dagster")
    parser.add_argument("--mode", default="ApiPull", help="ApiPull (default) or TopicReplay")
    parser.add_argument("--page-size", type=int, help="1..2000 (default CHESSBOARD_IMPORT_PAGE_SIZE)")
    parser.add_argument("--developer-id", help="Talent developer id: re-sync one developer")
    parser.add_argument(
        "--project-id",
        dest="project_id_filter",
        metavar="PROJECT_ID",
        help="Talent project id: re-sync one project",
    )
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


def import_command(args: argparse.Namespace) -> int:
    # Dagster is imported here: `pin-chessboard --help` stays fast.
    import dagster as dg

    from pin_chessboard_pipelines.defs.talent_import.config import TalentImportConfig
    from pin_chessboard_pipelines.defs.talent_import.launch import ImportLauncher
    from pin_chessboard_pipelines.defs.talent_import.session import import_request
    from pin_chessboard_pipelines.runtime.services import prepare_dagster_home, store_engine

    settings = load_settings()
    run_id = str(uuid.uuid4())  # the Dagster run id, and so the CorrelationId
    # the launchpad's config as typed; the request built from it checks it (one line, exit 2)
    config = TalentImportConfig.model_construct(**{name: getattr(args, name) for name in CONFIG_OPTIONS})
    developer_ids = [args.developer_id] if args.developer_id else []
    request = import_request(settings, config, developer_ids, run_id)  # an invalid one: one line, exit 2
    require_talent_sync_enabled(settings)  # before DAGSTER_HOME or the embedded database is touched
    prepare_dagster_home(settings)
    launcher = ImportLauncher(dg.DagsterInstance.get(), store_engine(settings), settings)
    result = launcher.run_here(config, list(request.developer_ids), run_id, run_config=CONSOLE_LOGGER)
    print(result.to_json(), flush=True)
    if result.status == RunStatus.COMPLETED:
        return EXIT_OK
    # the last line of stderr: how the run ended and why, once
    print(f"import {result.run_id} {result.status}: {_error_of(settings, result)}", file=sys.stderr)
    return EXIT_FAILED


def _error_of(settings: Settings, result: TalentInitialImportResult) -> str:
    from pin_chessboard_pipelines.runtime.services import store_engine

    try:
        with store_engine(settings).connect() as conn:
            row = runs.get_run(conn, uuid.UUID(result.run_id))
    except Exception as error:  # noqa: BLE001 - the store may be down: the line says so instead
        return f"(the run's error could not be read: {error_line(error)})"
    recorded = row["error"] if row is not None else None
    return str(recorded or "no error recorded")

"""What every command group's parser shares: the one-line parser and the argument types."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from uuid import UUID

from pin_chessboard_pipelines.errors import EXIT_REFUSED


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line naming what is wrong, exit 2 (no usage dump)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_REFUSED, f"{self.prog}: {message}\n")


def positive_seconds(raw: str) -> float:
    """argparse type of a `--… SECONDS` option."""
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a positive number of seconds")
    return value


def uuid_argument(raw: str) -> UUID:
    """argparse type of a `--project-id PIN_ID` option."""
    try:
        return UUID(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a UUID") from None


def add_command_group(
    subparsers: argparse._SubParsersAction,
    name: str,
    help: str,  # noqa: A002 - argparse's own word
) -> argparse._SubParsersAction:
    """`pin-chessboard <name> <command>`: the group's parser; its commands are added to what this
    returns (the chosen one in `args.<name>_command`)."""
    group = subparsers.add_parser(name, help=help)
    return group.add_subparsers(dest=f"{name.replace('-', '_')}_command", required=True)


def add_until_empty(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002
    parser.add_argument("--until-empty", action="store_true", help=help)


def add_time_budget(parser: argparse.ArgumentParser, help: str) -> None:  # noqa: A002
    parser.add_argument("--time-budget", type=positive_seconds, metavar="SECONDS", help=help)


def add_consumer_parser(
    subparsers: argparse._SubParsersAction,
    name: str,
    help: str,  # noqa: A002 - argparse's own word
    until_idle_help: str,
    func: Callable[[argparse.Namespace], int],
) -> argparse.ArgumentParser:
    """The parser of a consumer command (talent-sync, handbook-sync): `--until-idle`, `--time-budget`,
    and its dead letters' commands (`replay-dlq`, `dead-letters`)."""
    parser = subparsers.add_parser(name, help=help)
    parser.add_argument("--until-idle", action="store_true", help=until_idle_help)
    add_time_budget(parser, "stop after this long (default: never)")
    parser.set_defaults(func=func)
    add_replay_dlq_parser(parser, name)
    return parser


def consumer_job_config(args: argparse.Namespace) -> dict[str, object]:
    """The run config of a consumer command's job."""
    return {"until_idle": bool(args.until_idle), "time_budget_seconds": args.time_budget}


def add_replay_dlq_parser(parser: argparse.ArgumentParser, consumer: str) -> None:
    """`<consumer> replay-dlq`: the consumer's dead letters applied again (the replay_dead_letters job)."""
    commands = parser.add_subparsers(
        dest="consumer_command", required=False, metavar="{replay-dlq,dead-letters}"
    )
    replay = commands.add_parser(
        "replay-dlq",
        help=f"apply {consumer}'s dead letters again once their cause is fixed (the replay_dead_letters job)",
    )
    replay.set_defaults(func=lambda _args: replay_dlq_command(consumer))
    listing = commands.add_parser(
        "dead-letters",
        help=f"list {consumer}'s dead letters waiting to be replayed: key, origin, error, age "
        "(the list_dead_letters job)",
    )
    listing.add_argument(
        "--limit",
        type=_limit,
        default=100,
        metavar="N",
        help="dead letters listed, 0..10000 (default 100; the count is all of them)",
    )
    listing.set_defaults(func=lambda args: dead_letters_command(consumer, args.limit))


def _limit(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 10000:
        raise argparse.ArgumentTypeError(f"{raw!r}: expected an integer 0..10000")
    return value


def dead_letters_command(consumer: str, limit: int) -> int:
    """The list_dead_letters job for one consumer through the Dagster instance in DAGSTER_HOME: each
    waiting dead letter one line on stderr (the run's log), the summary JSON on the last line of
    stdout (`waiting`, `consumers[].deadLetters[]`); exit 0 (also when some wait), 1 failed."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.dead_letters.listing import JOB_NAME, OP_NAME
    from pin_chessboard_pipelines.settings import load_settings

    return run_job(JOB_NAME, OP_NAME, {"consumer": consumer, "limit": limit}, load_settings())


def replay_dlq_command(consumer: str) -> int:
    """The replay job through the Dagster instance in DAGSTER_HOME; the last line of stdout is its
    summary JSON; exit 0 done (also when some failed again: they wait in the topic), 1 failed, 2 refused."""
    from pin_chessboard_pipelines.cli.jobs import run_job
    from pin_chessboard_pipelines.defs.dead_letters.definitions import JOB_NAME, OP_NAME
    from pin_chessboard_pipelines.settings import load_settings

    return run_job(JOB_NAME, OP_NAME, {"consumer": consumer}, load_settings())

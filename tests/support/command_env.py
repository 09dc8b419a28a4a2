"""The environment of a `pin-chessboard` command started as a subprocess by a test: this process's
environment without the project's own variables (the test's settings must not leak from the
developer's shell or another test), then the test's database, its Dagster home, its state folder
and the checkout on PYTHONPATH."""

from __future__ import annotations

import os
from pathlib import Path

from pin_chessboard_pipelines.settings import PROJECT_ROOT

PROJECT_PREFIXES = ("CHESSBOARD_", "DAGSTER_", "TALENT_")


def clean_environ(*more_prefixes: str) -> dict[str, str]:
    """os.environ less every variable whose name starts with PROJECT_PREFIXES or `more_prefixes`."""
    prefixes = PROJECT_PREFIXES + more_prefixes
    return {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}


def command_env(
    db_url: str,
    state_dir: Path,
    *,
    dagster_home: Path | None = None,
    drop: tuple[str, ...] = (),
    **extra: str,
) -> dict[str, str]:
    """clean_environ(*drop) with CHESSBOARD_DATABASE_URL, PIN_CHESSBOARD_STATE_DIR, PYTHONPATH (the
    checkout), DAGSTER_HOME when given, and `extra` last."""
    env = clean_environ(*drop)
    env.update(
        CHESSBOARD_DATABASE_URL=db_url,
        PIN_CHESSBOARD_STATE_DIR=str(state_dir),
        PYTHONPATH=str(PROJECT_ROOT),
    )
    if dagster_home is not None:
        env["DAGSTER_HOME"] = str(dagster_home)
    env.update(extra)
    return env

"""The `pin-chessboard` command line: exit codes and one-line errors (README.md#commands)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "args", "starts_with"),
    [
        ({"CHESSBOARD_IMPORT_PAGE_SIZE": "9999"}, ["db", "upgrade"], "CHESSBOARD_IMPORT_PAGE_SIZE="),
        ({"CHESSBOARD_DATABASE_URL": "sqlite:///x"}, ["db", "upgrade"], "CHESSBOARD_DATABASE_URL="),
        ({"CHESSBOARD_RECALC_DRAINS": "17"}, ["recalc", "drain"], "CHESSBOARD_RECALC_DRAINS="),
        ({}, ["db", "downgrade"], "pin-chessboard db: argument"),
        ({}, ["no-such-command"], "pin-chessboard: argument"),
    ],
)
def test_invalid_input_is_one_line_and_exit_2(env, args, starts_with):
    result = run_cli(*args, env=env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(starts_with)
    assert "Traceback" not in result.stderr


def test_db_upgrade_is_idempotent(db_url):
    for _ in range(2):
        result = run_cli("db", "upgrade", env={"CHESSBOARD_DATABASE_URL": db_url})
        assert result.returncode == 0, result.stderr
        assert "revision 0001" in result.stdout or "revision 000" in result.stdout


def test_unreachable_database_is_one_line_and_exit_1():
    result = run_cli("db", "upgrade", env={"CHESSBOARD_DATABASE_URL": "postgresql://u:pw123@127.0.0.1:1/x"})
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pw123" not in result.stderr

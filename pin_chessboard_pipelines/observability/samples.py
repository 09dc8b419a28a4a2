"""Where a process's metric samples go: a buffer of what it recorded since its last flush, written
by a sink into the store (store/metric_samples.py: one multi-row upsert into
chessboard.metric_samples), where `pin-chessboard metrics serve` reads every process's sum.

A step of a run may be a process or a pod of its own that lives for seconds, with nothing on its
disk that outlives it, so nothing of a sample stays in the process longer than a flush:
- a flush runs every FLUSH_SECONDS on a background thread, and when the process exits (`atexit`,
  and `multiprocessing.util.Finalize` for the children of Dagster's multiprocess executor, which
  end in `os._exit`): a step process or pod flushes as it ends;
- counters and histogram buckets are deltas added to the stored sum; a `max` gauge keeps the
  greatest value; a `live` gauge is this process's own row, rewritten every LIVE_REFRESH_SECONDS
  and left out of a scrape LIVE_SECONDS after its process stopped refreshing it (removed at exit);
- a flush that fails (the store is down) keeps its deltas for the next one: a sample is lost only
  when its process dies (SIGKILL) before the next flush, at most FLUSH_SECONDS of it.

Samples recorded before a sink is installed wait in the buffer for the first one.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing.util
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

FLUSH_SECONDS = 1.0
LIVE_REFRESH_SECONDS = 10.0
LIVE_SECONDS = 30.0  # a live gauge not refreshed this long belongs to a process that is gone

ADDED = ("counter", "histogram")  # kinds whose samples are summed over processes
MAXED = ("gauge_max",)  # the greatest value any process recorded
LIVE = ("gauge_livemax",)  # one value per live process; the scrape shows the greatest

Key = tuple[str, str]  # (kind, sample key)


class Sink(Protocol):
    def write(
        self, owner: str, added: Mapping[Key, float], maxed: Mapping[Key, float], live: Mapping[Key, float]
    ) -> None:
        """One transaction: `added` summed into the stored values, `maxed` kept when greater,
        `live` this owner's rows (replaced, their time renewed)."""

    def forget(self, owner: str) -> None:
        """The owner's live rows removed (its process exits)."""


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class Buffer:
    """One process's samples not yet written, and the sink that writes them."""

    sink: Sink | None = None
    owner: str = field(default_factory=_owner)
    added: dict[Key, float] = field(default_factory=dict)
    maxed: dict[Key, float] = field(default_factory=dict)
    live: dict[Key, float] = field(default_factory=dict)
    live_changed: bool = False
    live_written_at: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)  # the pending samples
    flushing: threading.Lock = field(default_factory=threading.Lock)  # one flush at a time
    warned: bool = False

    def record(self, kind: str, items: list[tuple[str, float]]) -> None:
        with self.lock:
            if kind in ADDED:
                for key, amount in items:
                    self.added[(kind, key)] = self.added.get((kind, key), 0.0) + amount
            elif kind in MAXED:
                for key, value in items:
                    old = self.maxed.get((kind, key))
                    self.maxed[(kind, key)] = value if old is None else max(old, value)
            elif kind in LIVE:
                for key, value in items:
                    self.live[(kind, key)] = value
                self.live_changed = True
            else:
                raise ValueError(f"unknown sample kind {kind!r}")

    def flush(self, now: float | None = None) -> bool:
        """Writes what is pending; False (the samples kept) when there is no sink or it failed."""
        with self.flushing:
            now = time.monotonic() if now is None else now
            with self.lock:
                sink = self.sink
                if sink is None:
                    return False
                refresh = bool(self.live) and (
                    self.live_changed or now - self.live_written_at >= LIVE_REFRESH_SECONDS
                )
                added, maxed = self.added, self.maxed
                live = dict(self.live) if refresh else {}
                if not (added or maxed or live):
                    return True
                self.added, self.maxed, self.live_changed = {}, {}, False
            try:
                sink.write(self.owner, added, maxed, live)
            except Exception as error:  # noqa: BLE001 - a metric never fails the job it observes
                with self.lock:
                    for key, amount in added.items():
                        self.added[key] = self.added.get(key, 0.0) + amount
                    for key, value in maxed.items():
                        self.maxed[key] = max(value, self.maxed.get(key, value))
                    self.live_changed = self.live_changed or bool(live)
                if not self.warned:
                    self.warned = True
                    log.warning("metrics not written yet, kept for the next flush (%s)", type(error).__name__)
                return False
            self.warned = False
            if live:
                self.live_written_at = now
            return True

    def close(self) -> None:
        """At exit: the last flush, then this process's live rows removed."""
        self.flush()
        with self.lock:
            sink, had_live = self.sink, bool(self.live)
        if sink is not None and had_live:
            with contextlib.suppress(Exception):  # they expire after LIVE_SECONDS anyway
                sink.forget(self.owner)


class _Process:
    """This process's buffer and its flushing thread; a forked child starts with empty ones (its
    parent writes what it recorded itself)."""

    def __init__(self) -> None:
        self.buffer = Buffer()
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.exit_hooks = False

    def install(self, sink: Sink) -> None:
        previous = self.buffer.sink
        if previous is not None and previous is not sink:
            self.buffer.flush()  # what was counted for the previous store goes there
        with self.buffer.lock:
            self.buffer.sink = sink
        if not self.exit_hooks:
            self.exit_hooks = True
            atexit.register(self.close)
            multiprocessing.util.Finalize(None, self.close, exitpriority=100)
        if self.thread is None or not self.thread.is_alive():
            self.stop.clear()
            self.thread = threading.Thread(target=self._loop, name="metric-samples", daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        while not self.stop.wait(FLUSH_SECONDS):
            self.buffer.flush()

    def close(self) -> None:
        self.stop.set()
        self.buffer.close()

    def after_fork(self) -> None:
        self.buffer = Buffer(sink=self.buffer.sink)
        self.thread = None
        self.stop = threading.Event()
        self.exit_hooks = False


_PROCESS = _Process()
os.register_at_fork(after_in_child=_PROCESS.after_fork)


def install(sink: Sink) -> None:
    """From now on this process's samples go to `sink` (a Dagster resource's setup, the CLI)."""
    _PROCESS.install(sink)


def record(kind: str, items: list[tuple[str, float]]) -> None:
    """Counter and histogram amounts are added, gauge values set (see the kinds above)."""
    _PROCESS.buffer.record(kind, items)


def flush() -> bool:
    """Writes this process's pending samples now (the end of a step, a test's read)."""
    return _PROCESS.buffer.flush()


def discard() -> None:
    """Drops what is pending (a test that counts from zero)."""
    with _PROCESS.buffer.lock:
        _PROCESS.buffer.added.clear()
        _PROCESS.buffer.maxed.clear()
        _PROCESS.buffer.live.clear()

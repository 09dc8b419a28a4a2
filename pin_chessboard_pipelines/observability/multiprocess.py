"""The metrics folder shared by every process that runs a job (PROMETHEUS_MULTIPROC_DIR).

Each process writes its samples to files of its own, `<kind>_<pid>-<token>.db` in
prometheus_client's mmap format, and holds a shared `flock` on each for as long as it lives. A
Dagster run is a process of its own (a drain every few seconds), so `metrics serve` compacts the
folder at every scrape: a file whose lock can be taken exclusively belongs to a dead process; its
counters and histograms are added into the archive (max/min/most-recent gauges merged the same
way, `live` gauges dropped) and the file is removed. The folder therefore holds the live processes'
files plus one archive, however many runs came and went.

Crash safety: the archive is a directory `archive-<generation>` that the symlink `archive` points
to, with `merged.json` naming the process files it already contains. A compaction builds the next
generation beside the current one, swaps the symlink (the commit point), then removes the merged
files; one interrupted at any step is finished or undone by the next. Exporters (scrapes, several
`metrics serve` on one folder) serialise on an exclusive `flock` of `.lock`; job processes never
take it.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.metrics_core import Metric
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

log = logging.getLogger(__name__)

PROCESS_FILE = re.compile(
    r"^(counter|histogram|gauge_(?:live)?(?:min|max|sum|mostrecent|all))_(\d+)-([0-9a-f]+)\.db$"
)
ARCHIVE = "archive"  # symlink to the current archive-<generation> directory
MERGED = "merged.json"
LOCK = ".lock"
STALE_TMP_SECONDS = 60  # a writer renames its new file within microseconds

# -- writing (job processes) -------------------------------------------------------------------

_lock = threading.Lock()
_configured: Path | None = None
_writer: _Writer | None = None
_warned = False


def configure(directory: str | Path | None) -> None:
    """The folder this process writes to from now on; None: PROMETHEUS_MULTIPROC_DIR of settings."""
    global _configured, _writer
    with _lock:
        _configured = Path(directory) if directory is not None else None
        if _writer is not None:
            _writer.close()
        _writer = None


def directory() -> Path:
    if _configured is not None:
        return _configured
    from pin_chessboard_pipelines.settings import load_settings  # read when first needed, not on import

    return load_settings().metrics_dir


class _Writer:
    """This process's files, one per kind, created on first use."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.pid = os.getpid()
        self.token = secrets.token_hex(4)
        self.files: dict[str, tuple[MmapedDict, int]] = {}

    def file(self, prefix: str) -> MmapedDict:
        if prefix not in self.files:
            self.folder.mkdir(parents=True, exist_ok=True)
            final = self.folder / f"{prefix}_{self.pid}-{self.token}.db"
            # locked and initialised under a name no reader looks at, then renamed: a file that
            # shows up is either locked by its live writer or dead
            tmp = final.with_suffix(".tmp")
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            fcntl.flock(fd, fcntl.LOCK_SH)
            values = MmapedDict(str(tmp))
            os.rename(tmp, final)
            self.files[prefix] = (values, fd)
        return self.files[prefix][0]

    def close(self) -> None:
        for values, fd in self.files.values():
            values.close()
            os.close(fd)
        self.files.clear()


def record(prefix: str, key: str, amount: float, add: bool) -> None:
    record_many(prefix, [(key, amount)], add)


def record_many(prefix: str, items: Iterable[tuple[str, float]], add: bool) -> None:
    """Adds to (or sets) samples of this process's `prefix` file. A metric never fails a job: an
    unusable folder is logged once and the samples are dropped."""
    global _writer, _warned
    with _lock:
        try:
            if _writer is None or _writer.pid != os.getpid():  # first use, or a forked child
                if _writer is None:
                    atexit.register(_close_at_exit)
                _writer = _Writer(directory())
            values = _writer.file(prefix)
            now = time.time()
            for key, amount in items:
                value = values.read_value(key)[0] + amount if add else amount
                values.write_value(key, value, now)
        except Exception as error:  # noqa: BLE001 - observability must not break the job it observes
            if not _warned:
                _warned = True
                log.warning("metrics not recorded (%s: %s)", type(error).__name__, error)


def _close_at_exit() -> None:
    with _lock:
        if _writer is not None and _writer.pid == os.getpid():
            _writer.close()


# -- compaction and reading (metrics serve) ----------------------------------------------------


@dataclass(frozen=True)
class Compaction:
    merged: int  # process files added to the archive and removed
    generation: int


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def compact(folder: Path) -> Compaction:
    with _folder_lock(folder):
        return _compact(folder)


def collect(folder: Path) -> list[Metric]:
    """Every process's samples plus the archive, merged as prometheus_client does (after a
    compaction, so dead processes' files are read from the archive once)."""
    with _folder_lock(folder):
        _compact(folder)
        current = _current(folder)
        files = [str(p) for p in _process_files(folder)]
        if current is not None:
            files += sorted(str(p) for p in current.glob("*_archive.db"))
        return list(MultiProcessCollector.merge(files, accumulate=True))


def _process_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if PROCESS_FILE.match(p.name))


def _current(folder: Path) -> Path | None:
    link = folder / ARCHIVE
    if not link.is_symlink():
        return None
    return folder / os.readlink(link)


def _generation(archive: Path | None) -> int:
    return int(archive.name.rsplit("-", 1)[1]) if archive is not None else 0


def _is_dead(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # drops the probe's lock


def _read(path: Path) -> Iterator[tuple[str, float, float]]:
    for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(str(path)):
        yield key, value, timestamp


def _combine(prefix: str, into: dict[str, tuple[float, float]], key: str, value: float, ts: float) -> None:
    old = into.get(key)
    if old is None:
        into[key] = (value, ts)
    elif prefix in ("counter", "histogram", "gauge_sum"):
        into[key] = (old[0] + value, max(old[1], ts))
    elif prefix == "gauge_max":
        into[key] = max(old, (value, ts))
    elif prefix == "gauge_min":
        into[key] = min(old, (value, ts))
    elif ts >= old[1]:  # gauge_mostrecent
        into[key] = (value, ts)


def _archived(prefix: str) -> bool:
    """`live` gauges die with their process; `all` gauges are per pid: neither outlives it."""
    return prefix in ("counter", "histogram") or prefix in (
        "gauge_sum",
        "gauge_max",
        "gauge_min",
        "gauge_mostrecent",
    )


def _compact(folder: Path) -> Compaction:
    current = _current(folder)
    # finish (or undo) an interrupted compaction
    if current is not None and (current / MERGED).exists():
        for name in json.loads((current / MERGED).read_text()):
            (folder / name).unlink(missing_ok=True)
    for stale in folder.glob(f"{ARCHIVE}-*"):
        if stale != current:
            shutil.rmtree(stale, ignore_errors=True)
    (folder / f"{ARCHIVE}.link").unlink(missing_ok=True)
    for tmp in folder.glob("*.tmp"):  # a writer that died between create and rename
        with contextlib.suppress(FileNotFoundError):
            if time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS and _is_dead(tmp):
                tmp.unlink(missing_ok=True)

    dead = [p for p in _process_files(folder) if _is_dead(p)]
    generation = _generation(current)
    if not dead:
        return Compaction(0, generation)

    values: dict[str, dict[str, tuple[float, float]]] = {}
    if current is not None:
        for path in current.glob("*_archive.db"):
            prefix = path.name.removesuffix("_archive.db")
            values[prefix] = {key: (value, ts) for key, value, ts in _read(path)}
    for path in dead:
        prefix = PROCESS_FILE.match(path.name).group(1)  # type: ignore[union-attr]
        if not _archived(prefix):
            continue
        into = values.setdefault(prefix, {})
        for key, value, ts in _read(path):
            _combine(prefix, into, key, value, ts)

    generation += 1
    target = folder / f"{ARCHIVE}-{generation}"
    target.mkdir()
    for prefix, samples in values.items():
        path = target / f"{prefix}_archive.db"
        archive = MmapedDict(str(path))
        for key, (value, ts) in samples.items():
            archive.write_value(key, value, ts)
        archive.close()
        _fsync(path)
    (target / MERGED).write_text(json.dumps([p.name for p in dead]))
    _fsync(target / MERGED)
    _fsync(target)
    link = folder / f"{ARCHIVE}.link"
    os.symlink(target.name, link)
    os.replace(link, folder / ARCHIVE)  # the commit point
    _fsync(folder)
    for path in dead:
        path.unlink(missing_ok=True)
    if current is not None:
        shutil.rmtree(current, ignore_errors=True)
    return Compaction(len(dead), generation)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""The metrics folder: per-process files, compaction of dead processes into the archive, recovery
from an interrupted compaction, concurrent scrapes, and a folder that stays small over many runs."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pin_chessboard_pipelines.observability import metrics, multiprocess
from pin_chessboard_pipelines.observability.exporter import FolderCollector


@pytest.fixture
def folder(tmp_path: Path):
    multiprocess.configure(tmp_path)
    yield tmp_path
    multiprocess.configure(None)


def _in_child(work: Callable[[], None]) -> int:
    """Runs `work` in a forked process that exits right after (a short Dagster run)."""
    pid = os.fork()
    if pid == 0:
        try:
            work()
        finally:
            os._exit(0)
    return pid


def _run_children(n: int, work: Callable[[], None]) -> None:
    for pid in [_in_child(work) for _ in range(n)]:
        assert os.waitpid(pid, 0)[1] == 0


def _samples(folder: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(FolderCollector(folder))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _drain_run() -> None:
    metrics.RECALC_RUNS.labels(result="success").inc(2)
    metrics.RECALC_REPUBLISHED.labels(entity="project").inc()
    metrics.RECALC_PROCESS_DURATION.observe(0.003)
    metrics.RECALC_PROCESS_DURATION.observe(3.0)
    metrics.RECALC_LAST_TICK.set(1000 + os.getpid())
    metrics.TALENT_SYNC_LAG.set(7)


def _process_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if multiprocess.PROCESS_FILE.match(p.name))


def test_dead_processes_are_summed_into_the_archive_and_removed(folder):
    _run_children(3, _drain_run)
    assert len(_process_files(folder)) == 4 * 3  # counter, histogram, gauge_max, gauge_livemax
    samples = _samples(folder)
    assert _process_files(folder) == []
    assert samples[("chessboard_recalc_runs_total", (("result", "success"),))] == 6
    assert samples[("chessboard_recalc_republished_total", (("entity", "project"),))] == 3
    assert samples[("chessboard_recalc_process_duration_seconds_count", ())] == 6
    assert samples[("chessboard_recalc_process_duration_seconds_bucket", (("le", "0.005"),))] == 3
    assert samples[("chessboard_recalc_process_duration_seconds_bucket", (("le", "2.0"),))] == 3
    assert samples[("chessboard_recalc_process_duration_seconds_bucket", (("le", "+Inf"),))] == 6
    assert samples[("chessboard_recalc_process_duration_seconds_sum", ())] == pytest.approx(9.009)
    assert samples[("chessboard_recalc_last_tick_timestamp_seconds", ())] > 1000
    # a live gauge dies with its process; a label-less counter nobody touched shows 0
    assert samples[("chessboard_talent_sync_lag_messages", ())] == 0  # not the dead process's 7
    assert samples[("chessboard_import_failed_items_total", ())] == 0
    # more runs add to the archive; a scrape without new dead files changes nothing
    _run_children(2, _drain_run)
    assert _samples(folder)[("chessboard_recalc_runs_total", (("result", "success"),))] == 10
    assert _samples(folder)[("chessboard_recalc_runs_total", (("result", "success"),))] == 10


def test_a_live_process_is_read_but_not_compacted(folder):
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()

    def live() -> None:
        metrics.IMPORT_FAILED_ITEMS.inc(4)
        metrics.TALENT_SYNC_LAG.set(12)
        os.write(ready_w, b"r")
        os.read(go_r, 1)  # until the parent lets it go

    pid = _in_child(live)
    assert os.read(ready_r, 1) == b"r"
    samples = _samples(folder)
    assert samples[("chessboard_import_failed_items_total", ())] == 4
    assert samples[("chessboard_talent_sync_lag_messages", ())] == 12
    assert len(_process_files(folder)) == 2
    os.write(go_w, b"g")
    os.waitpid(pid, 0)
    for fd in (ready_r, ready_w, go_r, go_w):
        os.close(fd)
    samples = _samples(folder)
    assert samples[("chessboard_import_failed_items_total", ())] == 4
    assert samples[("chessboard_talent_sync_lag_messages", ())] == 0  # gone with its process
    assert _process_files(folder) == []


def test_an_interrupted_compaction_counts_every_file_once(folder):
    _run_children(2, _drain_run)
    kept = {name: (folder / name).read_bytes() for name in _process_files(folder)}
    assert _samples(folder)[("chessboard_recalc_runs_total", (("result", "success"),))] == 4
    # crash after the commit, before the merged files were removed: they come back
    for name, data in kept.items():
        (folder / name).write_bytes(data)
    # crash while a next generation was being built: a directory the symlink does not name
    (folder / "archive-99").mkdir()
    (folder / "archive-99" / "counter_archive.db").write_bytes(b"\0" * 64)
    assert _samples(folder)[("chessboard_recalc_runs_total", (("result", "success"),))] == 4
    assert _process_files(folder) == [] and not (folder / "archive-99").exists()


def test_concurrent_scrapes_see_monotonic_exact_totals(folder):
    seen: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def scrape() -> None:
        try:
            while not stop.is_set():
                value = _samples(folder).get(("chessboard_recalc_runs_total", (("result", "success"),)), 0)
                seen.append(value)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    scrapers = [threading.Thread(target=scrape) for _ in range(3)]
    for t in scrapers:
        t.start()
    try:
        _run_children(40, _drain_run)
    finally:
        stop.set()
        for t in scrapers:
            t.join()
    assert not errors, errors
    assert _samples(folder)[("chessboard_recalc_runs_total", (("result", "success"),))] == 80
    assert all(value <= 80 for value in seen)


def test_many_short_runs_leave_a_small_folder(folder):
    """(benchmarks/metrics_folder_bench.py does 1000 runs against `metrics serve`.)"""
    for _ in range(6):
        _run_children(50, _drain_run)
        multiprocess.compact(folder)
    assert _samples(folder)[("chessboard_recalc_runs_total", (("result", "success"),))] == 600
    names = sorted(p.name for p in folder.iterdir())
    assert names == [".lock", "archive", "archive-6"], names
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert size < 256 * 1024, size


def test_recording_never_fails_the_job(tmp_path):
    (tmp_path / "file").write_text("")
    multiprocess.configure(tmp_path / "file" / "not-a-folder")
    try:
        metrics.RECALC_RUNS.labels(result="error").inc()  # logged once, dropped
    finally:
        multiprocess.configure(None)
    shutil.rmtree(tmp_path / "file", ignore_errors=True)


def test_importing_metrics_changes_no_environment():
    import subprocess
    import sys

    code = (
        "import os; before = dict(os.environ); "
        "import pin_chessboard_pipelines.observability.metrics, pin_chessboard_pipelines.observability.exporter; "
        "assert dict(os.environ) == before; print('ok')"
    )
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_labels_are_checked():
    with pytest.raises(ValueError):
        metrics.RECALC_RUNS.labels("a", "b")
    with pytest.raises(ValueError):
        metrics.IMPORT_PAGES.labels(stage="Projects")

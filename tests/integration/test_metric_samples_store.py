"""chessboard.metric_samples on a real store, written by real OS processes that live for moments,
as the steps of a run do (a multiprocess child, a pod's `dagster api execute_step`): what each
counted is in the sum once it exited, with no flush of its own and no disk shared with the reader;
a process killed with SIGKILL leaves no live gauge behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from pin_chessboard_pipelines.observability.exporter import families_of
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.metric_samples import prune_live, read_samples
from tests.support.polling import wait_until

STEP = textwrap.dedent(
    """
    import sys
    from pin_chessboard_pipelines.observability import metrics, samples
    from pin_chessboard_pipelines.store.metric_samples import store_sink

    def step(url, pages):
        samples.install(store_sink(url))
        for _ in range(pages):
            metrics.IMPORT_PAGES.labels(stage="Projects", status="Done").inc()
            metrics.IMPORT_PAGE_DURATION.observe(40)
        metrics.TALENT_SYNC_LAG.set(pages)
    """
)


def _value(url: str, name: str, live_seconds: float = 30.0, **labels: str) -> float:
    for family in families_of(read_samples(url, live_seconds)):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def _python(tmp_path: Path, code: str, url: str) -> subprocess.Popen:
    (tmp_path / "step_module.py").write_text(STEP)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{PROJECT_ROOT}"}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), url], env=env, cwd=tmp_path)


def test_short_lived_processes_add_up_in_the_store(db_url, tmp_path):
    main = """
        import sys
        from step_module import step
        step(sys.argv[1], 25)  # returns and exits: the atexit flush
    """
    child = """
        import multiprocessing, sys
        from step_module import step
        if __name__ == "__main__":
            # Dagster's multiprocess executor: a forkserver child ends in os._exit (no atexit)
            ctx = multiprocessing.get_context("forkserver")
            children = [ctx.Process(target=step, args=(sys.argv[1], 25)) for _ in range(3)]
            for p in children: p.start()
            for p in children: p.join(); assert p.exitcode == 0
    """
    processes = [_python(tmp_path, main, db_url) for _ in range(3)] + [_python(tmp_path, child, db_url)]
    assert [p.wait(timeout=120) for p in processes] == [0, 0, 0, 0]
    pages = {"stage": "Projects", "status": "Done"}
    assert _value(db_url, "chessboard_import_pages_total", **pages) == 6 * 25
    assert _value(db_url, "chessboard_import_page_duration_ms_count") == 6 * 25
    assert _value(db_url, "chessboard_import_page_duration_ms_bucket", le="50.0") == 6 * 25
    # every process removed its live gauge at exit
    assert _value(db_url, "chessboard_talent_sync_lag_messages") == 0


def test_a_killed_process_loses_at_most_a_flush_and_its_live_gauge_expires(db_url, tmp_path):
    code = """
        import sys, time
        from step_module import step
        step(sys.argv[1], 10)
        time.sleep(600)  # killed while it lives: the flushing thread wrote its samples
    """
    process = _python(tmp_path, code, db_url)
    try:
        wait_until(lambda: _value(db_url, "chessboard_talent_sync_lag_messages") == 10, 60, "live gauge")
        assert _value(db_url, "chessboard_import_pages_total", stage="Projects", status="Done") == 10
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert _value(db_url, "chessboard_talent_sync_lag_messages") == 10  # until LIVE_SECONDS pass
    wait_until(
        lambda: _value(db_url, "chessboard_talent_sync_lag_messages", live_seconds=1) == 0,
        30,
        "the dead process's live gauge left out",
    )
    assert prune_live(db_url, older_than_seconds=1) == 1
    assert _value(db_url, "chessboard_import_pages_total", stage="Projects", status="Done") == 10

"""The metrics folder under many short-lived runs (a drain run every few seconds, each a process).

    python benchmarks/metrics_folder_bench.py [--runs 1000] [--exec] [--scrape-seconds 1]

Starts `pin-chessboard metrics serve` on a fresh PROMETHEUS_MULTIPROC_DIR, then runs --runs short
processes one after the other, each recording what a recalc drain records (runs, republished,
durations, lag, the tick gauge) and exiting; a scraper thread GETs /metrics every
--scrape-seconds as Prometheus would. Forked children by default (fast); --exec starts a fresh
interpreter per run instead. Figures: the folder's files and size (apparent and on disk) at the
peak and at the end, and chessboard_recalc_runs_total as scraped (must equal the runs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pin_chessboard_pipelines.observability import multiprocess  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import free_port  # noqa: E402

RUN = """
from pin_chessboard_pipelines.observability import metrics
metrics.RECALC_RUNS.labels(result="success").inc(3)
metrics.RECALC_COALESCED.inc(5)
metrics.RECALC_REPUBLISHED.labels(entity="project").inc(3)
metrics.RECALC_REPUBLISHED.labels(entity="layout").inc(6)
for d in (0.002, 0.003, 0.004):
    metrics.RECALC_PROCESS_DURATION.observe(d)
    metrics.RECALC_LAG.observe(31.0)
metrics.RECALC_LAST_TICK.set(__import__("time").time())
"""


def _folder_size(folder: Path) -> tuple[int, int, int]:
    """(files, apparent bytes, bytes on disk)."""
    files = apparent = disk = 0
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            st = path.stat()
            files += 1
            apparent += st.st_size
            disk += st.st_blocks * 512
    return files, apparent, disk


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()


def _value(text: str, sample: str) -> float:
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--exec", action="store_true", help="a fresh interpreter per run")
    parser.add_argument("--scrape-seconds", type=float, default=1.0)
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="metrics-folder-"))
    multiprocess.configure(folder)
    env = {
        **os.environ,
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "CHESSBOARD_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",  # store gauges: down
    }
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", "metrics", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert serve.stdout is not None
    serve.stdout.readline()  # "metrics on ...": listening
    url = f"http://127.0.0.1:{port}/metrics"

    peak = [(0, 0, 0)]
    stop = threading.Event()

    def scraper() -> None:
        while not stop.wait(args.scrape_seconds):
            before = _folder_size(folder)
            peak[0] = max(peak[0], before)
            _scrape(url)

    thread = threading.Thread(target=scraper, daemon=True)
    thread.start()
    started = time.perf_counter()
    code = compile(RUN, "<run>", "exec")
    for _ in range(args.runs):
        if args.exec:
            subprocess.run([sys.executable, "-c", RUN], env=env, check=True)
        else:
            pid = os.fork()
            if pid == 0:
                exec(code, {})
                os._exit(0)
            os.waitpid(pid, 0)
    elapsed = time.perf_counter() - started
    stop.set()
    thread.join()
    text = _scrape(url)
    files, apparent, disk = _folder_size(folder)
    serve.terminate()
    serve.wait(timeout=10)
    print(f"runs: {args.runs} short processes ({'exec' if args.exec else 'fork'}) in {elapsed:.1f} s")
    runs_total = _value(text, 'chessboard_recalc_runs_total{result="success"}')
    print(f"chessboard_recalc_runs_total scraped: {runs_total:.0f} (expected {3 * args.runs})")
    print(
        f"peak folder between scrapes: {peak[0][0]} files, {peak[0][1] / 1024:.0f} KiB apparent, {peak[0][2] / 1024:.0f} KiB on disk"
    )
    print(
        f"folder after the last scrape: {files} files, {apparent / 1024:.0f} KiB apparent, {disk / 1024:.0f} KiB on disk"
    )
    print("entries:", " ".join(sorted(p.name for p in folder.iterdir())))


if __name__ == "__main__":
    main()

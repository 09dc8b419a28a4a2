"""Metric samples on the store: what recording costs a job process, and what the flushes of many
processes cost PostgreSQL (observability/samples.py, store/sql/metric_samples.sql).

    python benchmarks/metric_samples_bench.py [--processes 1 4 8] [--seconds 10]

Figures:
- record: µs per import page's worth of samples (a pages counter, an items counter, a page
  duration observed: 15 series), in one process, against a plain dict update of the same 15 keys
  measured in the same run (the ratio);
- flush: P OS processes, each recording pages as fast as it can for --seconds and flushing every
  second as a step does; per P: flush statements, their p50 / p99 time, rows per statement, and
  whether the stored sum equals what the processes counted. Then one scrape's read.

Uses CHESSBOARD_DATABASE_URL's server (a scratch database is created and dropped) or a
throw-away embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.recalc_bench import scratch_server  # noqa: E402
from pin_chessboard_pipelines.observability import metrics, samples  # noqa: E402
from pin_chessboard_pipelines.observability.exporter import families_of  # noqa: E402
from pin_chessboard_pipelines.observability.samples import Key  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import admin_execute  # noqa: E402
from pin_chessboard_pipelines.store.engine import with_database  # noqa: E402
from pin_chessboard_pipelines.store.metric_samples import StoreSink, read_samples  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402

STAGE = "PropertyObjects"


def _page() -> None:
    metrics.IMPORT_PAGES.labels(stage=STAGE, status="Done").inc()
    metrics.IMPORT_ITEMS.labels(aggregate="PropertyObject", result="applied").inc(100)
    metrics.IMPORT_PAGE_DURATION.observe(42.0)


def bench_record(pages: int) -> None:
    samples.discard()
    started = time.perf_counter()
    for _ in range(pages):
        _page()
    recorded = (time.perf_counter() - started) / pages
    samples.discard()
    keys = [f"k{i}" for i in range(15)]
    plain: dict[str, float] = {}
    started = time.perf_counter()
    for _ in range(pages):
        for key in keys:
            plain[key] = plain.get(key, 0.0) + 1.0
    baseline = (time.perf_counter() - started) / pages
    print(
        f"record: {recorded * 1e6:.2f} µs per page (15 series); a plain dict update of 15 keys "
        f"{baseline * 1e6:.2f} µs: x{recorded / baseline:.1f}"
    )


class TimedSink(StoreSink):
    def __init__(self, url: str, times: list[float], rows: list[int]) -> None:
        super().__init__(url)
        self.times, self.rows = times, rows

    def write(
        self, owner: str, added: Mapping[Key, float], maxed: Mapping[Key, float], live: Mapping[Key, float]
    ) -> None:
        started = time.perf_counter()
        super().write(owner, added, maxed, live)
        self.times.append(time.perf_counter() - started)
        self.rows.append(len(added) + len(maxed) + len(live))


def _worker(url: str, seconds: float, out: multiprocessing.Queue) -> None:
    times: list[float] = []
    rows: list[int] = []
    samples.install(TimedSink(url, times, rows))
    pages = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        _page()
        pages += 1
        if pages % 200 == 0:
            time.sleep(0.001)  # a page's I/O: the flushing thread gets its turn
    samples.flush()
    out.put((pages, times, rows))


def bench_flush(url: str, processes: int, seconds: float) -> None:
    ctx = multiprocessing.get_context("spawn")
    out: multiprocessing.Queue = ctx.Queue()
    before = _stored_pages(url)
    workers = [ctx.Process(target=_worker, args=(url, seconds, out)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    results = [out.get(timeout=seconds + 120) for _ in workers]
    for worker in workers:
        worker.join()
    pages = sum(r[0] for r in results)
    times = sorted(t for r in results for t in r[1])
    rows = [n for r in results for n in r[2]]
    stored = _stored_pages(url) - before
    p99 = times[min(len(times) - 1, int(0.99 * (len(times) - 1)))]
    print(
        f"flush, P = {processes}: {len(times)} statements in {seconds:.0f} s "
        f"({len(times) / seconds:.1f}/s), p50 {statistics.median(times) * 1000:.2f} ms, "
        f"p99 {p99 * 1000:.2f} ms, {statistics.mean(rows):.0f} rows each; "
        f"{pages} pages counted, {stored:.0f} stored ({'equal' if stored == pages else 'DIFFERENT'})"
    )


def _stored_pages(url: str) -> float:
    for family in families_of(read_samples(url)):
        for sample in family.samples:
            if sample.name == "chessboard_import_pages_total" and sample.labels.get("stage") == STAGE:
                return sample.value
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--pages", type=int, default=200_000)
    args = parser.parse_args()
    server, handle = scratch_server("metric-samples-bench")
    database = f"metric_samples_bench_{uuid.uuid4().hex[:8]}"
    admin_execute(server, f'CREATE DATABASE "{database}"')
    url = with_database(server, database)
    try:
        upgrade(url)
        bench_record(args.pages)
        for processes in args.processes:
            bench_flush(url, processes, args.seconds)
        started = time.perf_counter()
        rows = read_samples(url)
        families = families_of(rows)
        print(
            f"scrape read: {len(rows)} stored samples, {len(families)} families in "
            f"{(time.perf_counter() - started) * 1000:.1f} ms"
        )
    finally:
        admin_execute(server, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        del handle
    return 0


if __name__ == "__main__":
    sys.exit(main())

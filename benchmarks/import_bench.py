"""Talent initial import benchmark: a full ApiPull bootstrap against a raw COPY of the same rows.

    python benchmarks/import_bench.py [--developers 100] [--objects-per-project 100]
                                      [--page-size 500] [--workers 2] [--processes 1,2,4]

`--processes P[,P...]`: one bootstrap per P, each stage worked on by P OS processes at once (the
code a Dagster page step runs: join the run, claim pages, one walker per stage under its walk lock),
on a fresh database each; per P: objects/s, the ratio to a raw COPY of the same rows, the CPU
seconds of PostgreSQL, the worker processes and the simulator, the pages read twice from the source,
and of the PropertyObjects stage the CPU per object and the statements per page.

The defaults are the simulator's "1m" preset: 100 developers x 100 projects = 10k projects,
1M property objects (50k buildings, 40k layout groups, 100k layouts). The simulator serves them
from a subprocess (`pin-chessboard talent-sim serve`); the import runs in this process through
`ImportSession.run_here`, with the real apply path: replica upserts, outbox rows (upserted + initial price
point + Sold statuses), recalc requests, page rows.

Reference, in the same run: the property-object rows the import stored are COPYed into an empty
copy of chessboard.property_objects (same indexes, no events, no checks).
ratio = import objects/s / COPY objects/s (target >= 0.25 on 2 cores, RSS < 500 MB).

Uses CHESSBOARD_DATABASE_URL's server when set, otherwise starts an embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text  # noqa: E402

from benchmarks import servers  # noqa: E402
from benchmarks.cpu import postmaster_pid, process_cpu_seconds, tree_cpu_seconds  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import admin_execute, ensure_database, free_port, wait_for_port  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine, libpq_url, with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402
from pin_chessboard_pipelines.talent_import.request import RunStatus, build_request  # noqa: E402
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession  # noqa: E402
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource  # noqa: E402

DATABASE = "chessboard_import_bench"


def _database(keep: list, settings: list[str]) -> str:
    given = os.environ.get("CHESSBOARD_DATABASE_URL")
    if given:
        admin = with_database(given, "postgres")
    else:
        server = servers.embedded_postgres("import-bench-pg-", settings)
        keep.append(server)
        admin = server.get_uri()
    admin_execute(admin, f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
    url = ensure_database(admin, DATABASE)
    upgrade(url)
    return url


def _simulator(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pin_chessboard_pipelines.cli",
            "talent-sim",
            "serve",
            "--port",
            str(port),
            "--dataset",
            "1m",
            "--set",
            f"developers={args.developers}",
            "--set",
            f"objects_per_project={args.objects_per_project}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "TALENT_API_TOKEN"},
    )
    wait_for_port("127.0.0.1", port, timeout=60)
    return proc, f"http://127.0.0.1:{port}"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _copy_reference(
    url: str, workdir: Path, table: str = "property_objects", where: str = "true", foreign_keys: bool = False
) -> tuple[int, float]:
    """(rows, seconds) of COPY FROM of the imported rows of `table` (those `where` holds) into an
    empty copy of it (same indexes, no checks; `foreign_keys`: with the table's foreign keys too,
    checked row by row as the replica's own are)."""
    import psycopg2

    dump = workdir / f"{table}.copy"
    copy_table = f"public.{table}_copy"
    conn = psycopg2.connect(libpq_url(url))
    try:
        with conn, conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {copy_table}")
            cur.execute(f"CREATE TABLE {copy_table} (LIKE chessboard.{table} INCLUDING ALL)")
            if foreign_keys:
                cur.execute(
                    "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                    "WHERE conrelid = %s::regclass AND contype = 'f'",
                    (f"chessboard.{table}",),
                )
                for name, definition in cur.fetchall():
                    cur.execute(f"ALTER TABLE {copy_table} ADD CONSTRAINT {name}_copy {definition}")
            with dump.open("w") as out:
                cur.copy_expert(f"COPY (SELECT * FROM chessboard.{table} WHERE {where}) TO STDOUT", out)
        started = time.perf_counter()
        with conn, conn.cursor() as cur, dump.open() as source:
            cur.copy_expert(f"COPY {copy_table} FROM STDIN", source)
        seconds = time.perf_counter() - started
        with conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {copy_table}")
            rows = cur.fetchone()[0]
    finally:
        conn.close()
        dump.unlink(missing_ok=True)
    return rows, seconds


def _outbox_reference(url: str, workdir: Path) -> tuple[int, float]:
    """The same for the property objects' outbox rows (upserted, price and status events): the
    part of the import's work that the contract fixes besides the objects themselves."""
    return _copy_reference(url, workdir, "outbox_messages", "topic LIKE 'pin.chessboard.property-object%'")


class _CountingSource(ApiPullSource):
    """The Talent API, counting the pages read again by cursor (the walk's reads are the listing)."""

    fetched = 0

    def fetch_page(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        type(self).fetched += 1
        return super().fetch_page(*args, **kwargs)


def _statement_kind(sql: str) -> str:
    """A statement's verb and the first chessboard table it names: what its time is filed under."""
    words = " ".join(sql.split())
    verb = next((w for w in words.split() if w in {"SELECT", "INSERT", "UPDATE", "DELETE", "COPY"}), "?")
    table = re.search(r"chessboard\.(\w+)", words)
    if table:
        return f"{verb} {table.group(1)}"
    return "SELECT 1 (the pool's ping)" if words == "SELECT 1" else words[:40]


def _count_statements(engine) -> tuple[list[int], dict[str, float]]:  # type: ignore[no-untyped-def]
    """Every statement and COPY this process sends through the engine's connections (SQLAlchemy's
    and the raw bulk cursors alike, pool pings included), and the wall seconds spent in each kind
    (_statement_kind): a cursor class that counts and times."""
    import psycopg2.extensions
    from sqlalchemy import event

    counter = [0]
    seconds: dict[str, float] = {}

    def timed(sql, call):  # type: ignore[no-untyped-def]
        counter[0] += 1
        started = time.perf_counter()
        try:
            return call()
        finally:
            kind = _statement_kind(str(sql))
            seconds[kind] = seconds.get(kind, 0.0) + time.perf_counter() - started

    class CountingCursor(psycopg2.extensions.cursor):
        def execute(self, query, vars=None):  # type: ignore[no-untyped-def]
            return timed(query, lambda: super(CountingCursor, self).execute(query, vars))

        def copy_expert(self, sql, file, size=8192):  # type: ignore[no-untyped-def]
            return timed(sql, lambda: super(CountingCursor, self).copy_expert(sql, file, size))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record):  # type: ignore[no-untyped-def]
        dbapi_connection.cursor_factory = CountingCursor

    return counter, seconds


def _worker(args: argparse.Namespace) -> int:
    """One process's share of one stage (what a Dagster page step does); its figures to --stats."""
    from pin_chessboard_pipelines.entities import BY_STAGE

    session = ImportSession(
        args.url,
        build_request(page_size=args.page_size, workers=args.workers, correlation_id=args.correlation_id),
        _CountingSource(args.sim_url),
        options=ImportOptions(lock_timeout_seconds=5),
    )
    statements, statement_seconds = _count_statements(session.engine)
    try:
        session.join()
        report = session.work_stage(BY_STAGE[args.worker])
    finally:
        session.close()
    Path(args.stats).write_text(
        json.dumps(
            {
                "statements": statements[0],
                "statement_seconds": statement_seconds,
                "pages": report.pages_processed,
                "fetched": _CountingSource.fetched,
            }
        )
    )
    return 0


def _import_on_processes(args: argparse.Namespace, url: str, sim_url: str, processes: int) -> dict:
    """The bootstrap with `processes` worker processes per stage; the stages one after another."""
    from pin_chessboard_pipelines.entities import ENTITIES
    from pin_chessboard_pipelines.talent_import.stage_runner import stage_report

    request = build_request(page_size=args.page_size, workers=args.workers)
    session = ImportSession(
        url, request, ApiPullSource(sim_url), options=ImportOptions(lock_timeout_seconds=5)
    )
    started = time.perf_counter()
    session.open()
    seconds: dict[str, float] = {}
    stats: dict[str, list[dict]] = {}
    cpu: dict[str, tuple[float, float]] = {}  # stage -> (PostgreSQL, workers) CPU seconds
    server: dict[str, dict[str, float]] = {}  # stage -> what PostgreSQL did (servers.SERVER_COUNTERS)
    postmaster = postmaster_pid(url)
    try:
        for stage in ENTITIES:
            stage_started = time.perf_counter()
            pg_before = tree_cpu_seconds(postmaster) if postmaster else float("nan")
            server_before = servers.server_counters(url)
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            stats_files = [Path(tempfile.mkstemp(prefix="import-bench-stats-")[1]) for _ in range(processes)]
            command = [
                sys.executable,
                __file__,
                "--worker",
                stage.stage,
                "--url",
                url,
                "--sim-url",
                sim_url,
                "--correlation-id",
                request.correlation_id,
                "--page-size",
                str(args.page_size),
                "--workers",
                str(args.workers),
            ]
            workers = [subprocess.Popen([*command, "--stats", str(f)]) for f in stats_files]
            if any(w.wait() for w in workers):
                raise SystemExit(f"a worker of stage {stage.stage} failed")
            children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # the workers' sessions have ended: their statistics are in
            server[stage.stage] = servers.counters_since(url, server_before)
            cpu[stage.stage] = (
                (tree_cpu_seconds(postmaster) - pg_before) if postmaster else float("nan"),
                (children_after.ru_utime + children_after.ru_stime)
                - (children_before.ru_utime + children_before.ru_stime),
            )
            stats[stage.stage] = [json.loads(f.read_text()) for f in stats_files]
            for f in stats_files:
                f.unlink()
            session.reports[stage.stage] = stage_report(
                session, stage, None, time.perf_counter() - stage_started
            )
            seconds[stage.stage] = time.perf_counter() - stage_started
        result = session.finish(RunStatus.COMPLETED)
    finally:
        session.close()
    return {
        "result": result,
        "seconds": time.perf_counter() - started,
        "stages": seconds,
        "session": session,
        "stats": stats,
        "stage_cpu": cpu,
        "stage_server": server,
        "url": url,
    }


def _bench_processes(args: argparse.Namespace) -> int:
    keep: list = []
    runs: list[tuple[int, dict]] = []
    sim, sim_url = _simulator(args)
    try:
        for processes in [int(p) for p in args.processes.split(",")]:
            url = _database(keep, args.pg_setting)
            postmaster = postmaster_pid(url)
            pg_before = tree_cpu_seconds(postmaster) if postmaster else 0.0
            sim_before = process_cpu_seconds(sim.pid)
            children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
            run = _import_on_processes(args, url, sim_url, processes)
            children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            run["cpu_workers"] = (children_after.ru_utime + children_after.ru_stime) - (
                children_before.ru_utime + children_before.ru_stime
            )
            run["cpu_simulator"] = process_cpu_seconds(sim.pid) - sim_before
            run["cpu_postgres"] = (tree_cpu_seconds(postmaster) - pg_before) if postmaster else float("nan")
            run["server_line"] = servers.counters_line(
                url,
                run["stage_server"]["PropertyObjects"],
                run["session"].reports["PropertyObjects"].counters.planned,
                "object",
            )
            with tempfile.TemporaryDirectory(prefix="import-bench-") as workdir:
                run["copy"] = _copy_reference(url, Path(workdir))
                run["copy_fk"] = _copy_reference(url, Path(workdir), foreign_keys=True)
                run["outbox_copy"] = _outbox_reference(url, Path(workdir))
            with get_engine(url).connect() as conn:
                run["claimed_elsewhere"] = conn.execute(
                    text(
                        "SELECT count(*) FROM chessboard.talent_import_pages"
                        " WHERE items_planned > 0 AND claimed_by IS DISTINCT FROM planned_by"
                    )
                ).scalar()
                run["read_from"] = dict(
                    conn.execute(
                        text(
                            "SELECT coalesce(items_read_from, '?'), count(*)"
                            " FROM chessboard.talent_import_pages GROUP BY 1"
                        )
                    ).all()
                )
                run["staged_left"] = conn.execute(
                    text("SELECT count(*) FROM chessboard.talent_import_staged_pages")
                ).scalar()
                run["pages"] = conn.execute(
                    text("SELECT count(*) FROM chessboard.talent_import_pages")
                ).scalar()
            run["read_twice"] = sum(w["fetched"] for ws in run["stats"].values() for w in ws)
            get_engine(url).dispose()
            runs.append((processes, run))
    finally:
        sim.terminate()
        sim.wait(30)
    print(
        f"{'P':>2} {'objects/s':>10} {'COPY rows/s':>12} {'ratio':>6} {'total s':>8} "
        f"{'PG cpu s':>9} {'workers cpu s':>14} {'sim cpu s':>10} {'pages read twice':>17} {'COPY floor':>10}"
    )
    for processes, run in runs:
        report = run["session"].reports["PropertyObjects"]
        rate = report.counters.planned / run["stages"]["PropertyObjects"]
        copy_rows, copy_seconds = run["copy"]
        copy_rate = copy_rows / copy_seconds
        outbox_rows, outbox_seconds = run["outbox_copy"]
        print(
            f"{processes:>2} {rate:>10,.0f} {copy_rate:>12,.0f} {rate / copy_rate:>6.3f} {run['seconds']:>8.1f} "
            f"{run['cpu_postgres']:>9.1f} {run['cpu_workers']:>14.1f} {run['cpu_simulator']:>10.1f} "
            f"{run['read_twice']:>10}/{run['pages']} {copy_seconds / (copy_seconds + outbox_seconds):>10.3f}"
        )
        objects = report.counters.planned
        pg_cpu, workers_cpu = run["stage_cpu"]["PropertyObjects"]
        object_stats = run["stats"]["PropertyObjects"]
        pages = sum(w["pages"] for w in object_stats) or 1
        statements = sum(w["statements"] for w in object_stats)
        print(
            f"   PropertyObjects: CPU per object PostgreSQL {pg_cpu / objects * 1e6:.0f} µs, workers "
            f"{workers_cpu / objects * 1e6:.0f} µs; {statements / pages:.1f} statements per page "
            f"({statements:,} over {pages} pages, every one the stage's processes sent)"
        )
        print(f"   PropertyObjects: {run['server_line']}")
        spent: dict[str, float] = {}
        for worker in object_stats:
            for kind, seconds in worker["statement_seconds"].items():
                spent[kind] = spent.get(kind, 0.0) + seconds
        total = sum(spent.values()) or 1.0
        top = sorted(spent.items(), key=lambda kv: -kv[1])[:8]
        print(
            f"   PropertyObjects: the processes' threads waited {total:.1f} s on statements (commits not "
            "included), of it: " + ", ".join(f"{kind} {seconds / total:.0%}" for kind, seconds in top)
        )
        fk_rows, fk_seconds = run["copy_fk"]
        print(
            f"   COPY with the replica's foreign keys: {fk_rows / fk_seconds:,.0f} rows/s, ratio "
            f"{rate / (fk_rows / fk_seconds):.3f}; COPY floor with foreign keys "
            f"{copy_seconds / (fk_seconds + outbox_seconds):.3f} (of the ratio above: COPYing the objects "
            "with their foreign keys and their outbox rows, nothing else, on one core)"
        )
        print(
            f"   pages by where their items came from: {run['read_from']}; claimed by another process than "
            f"the walker's: {run['claimed_elsewhere']}; staged rows left: {run['staged_left']}"
        )
        print(
            f"   the objects' {outbox_rows:,} outbox rows: COPY {outbox_seconds:.1f} s "
            f"({outbox_rows / copy_rows:.2f} per object, {outbox_rows / outbox_seconds:,.0f} rows/s)"
        )
    print("pages read twice: pages the workers read again from the source by cursor, after the walk read")
    print("them (walk: handed over in the walker's process; staged: from talent_import_staged_pages);")
    print("ratio = PropertyObjects objects/s / COPY rows/s; CPU per object: of the PropertyObjects stage")
    print("(its process starts included); COPY floor: the ratio of COPYing the objects and their outbox")
    print("rows, and nothing else, on one core")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--developers", type=int, default=100, help="100 projects each (default 100: 10k projects)"
    )
    parser.add_argument("--objects-per-project", type=int, default=100)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", help="P[,P...]: worker processes per stage, one bootstrap each")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a worker process: the stage it works on
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--sim-url", help=argparse.SUPPRESS)
    parser.add_argument("--correlation-id", help=argparse.SUPPRESS)
    parser.add_argument("--stats", help=argparse.SUPPRESS)  # a worker process: where its figures go
    servers.add_pg_setting_argument(parser)
    args = parser.parse_args()
    servers.check_pg_settings(parser, args)
    if args.worker:
        return _worker(args)
    if args.processes:
        return _bench_processes(args)

    keep: list = []
    url = _database(keep, args.pg_setting)
    sim, sim_url = _simulator(args)
    try:
        session = ImportSession(
            url,
            build_request(page_size=args.page_size, workers=args.workers),
            ApiPullSource(sim_url),
            options=ImportOptions(lock_timeout_seconds=5),
        )
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        session.open()
        result = session.run_stages()
        total_seconds = time.perf_counter() - started
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        sim.terminate()
        sim.wait(30)
    peak_rss_mb = cpu_after.ru_maxrss / 1024
    import_cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    simulator_cpu = children.ru_utime + children.ru_stime

    engine = get_engine(url)
    with engine.connect() as conn:
        outbox = conn.execute(text("SELECT count(*) FROM chessboard.outbox_messages")).scalar()
        objects = conn.execute(text("SELECT count(*) FROM chessboard.property_objects")).scalar()
    with tempfile.TemporaryDirectory(prefix="import-bench-") as workdir:
        copy_rows, copy_seconds = _copy_reference(url, Path(workdir))

    objects_report = session.reports["PropertyObjects"]
    object_rate = objects_report.counters.planned / objects_report.duration_seconds
    copy_rate = copy_rows / copy_seconds
    items = result.totals.planned
    print(
        f"import: status {result.status}, {items} items in {total_seconds:.1f} s ({items / total_seconds:,.0f} items/s)"
    )
    for name, report in session.reports.items():
        print(
            f"  {name:<16} {report.counters.planned:>9,} items {report.pages:>6} pages "
            f"{report.duration_seconds:7.1f} s {report.items_per_second:>9,.0f} items/s "
            f"page p50 {_percentile(report.page_durations_ms, 0.5):6.0f} ms p99 {_percentile(report.page_durations_ms, 0.99):6.0f} ms"
        )
    print(
        f"property objects: {objects:,} rows, {object_rate:,.0f} objects/s, outbox rows (all stages): {outbox:,}"
    )
    print(f"page p99 (property objects): {_percentile(objects_report.page_durations_ms, 0.99):.0f} ms")
    print(f"peak RSS of the import process: {peak_rss_mb:.0f} MB")
    print(
        f"CPU during the import: import process {import_cpu:.1f} s, simulator {simulator_cpu:.1f} s, "
        f"PostgreSQL and the rest <= {max(0.0, (os.cpu_count() or 1) * total_seconds - import_cpu - simulator_cpu):.1f} s "
        f"of {(os.cpu_count() or 1) * total_seconds:.1f} core-seconds"
    )
    print(f"raw COPY of the same {copy_rows:,} rows: {copy_seconds:.1f} s ({copy_rate:,.0f} rows/s)")
    print(f"ratio import/COPY (objects/s): {object_rate / copy_rate:.3f} (target >= 0.25)")
    engine.dispose()
    return 0 if result.status == "Completed" else 1


if __name__ == "__main__":
    sys.exit(main())

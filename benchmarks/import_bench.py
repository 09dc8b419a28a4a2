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
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text  # noqa: E402

from benchmarks import import_run, servers  # noqa: E402
from benchmarks.cpu import postmaster_pid, process_cpu_seconds, tree_cpu_seconds  # noqa: E402
from benchmarks.import_run import copy_reference, outbox_reference  # noqa: E402
from benchmarks.import_run import percentile as _percentile  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine  # noqa: E402
from pin_chessboard_pipelines.talent_import.request import build_request  # noqa: E402
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession  # noqa: E402
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource  # noqa: E402

DATABASE = "chessboard_import_bench"


def _database(keep: list, settings: list[str]) -> str:
    return import_run.database(keep, settings, DATABASE, "import-bench-pg-")


def _simulator(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    return import_run.simulator(
        {"developers": args.developers, "objects_per_project": args.objects_per_project}
    )


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
            run = import_run.import_on_processes(args, url, sim_url, processes)
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
                run["copy"] = copy_reference(url, Path(workdir))
                run["copy_fk"] = copy_reference(url, Path(workdir), foreign_keys=True)
                run["outbox_copy"] = outbox_reference(url, Path(workdir))
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
    servers.add_pg_setting_argument(parser)
    args = parser.parse_args()
    servers.check_pg_settings(parser, args)
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
        copy_rows, copy_seconds = copy_reference(url, Path(workdir))

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

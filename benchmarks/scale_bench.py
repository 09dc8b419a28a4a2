"""Scale benchmark: the bootstrap of N objects, then the recalc drained and the outbox relayed, per size.

    python benchmarks/scale_bench.py [--objects 100000,1000000,10000000] [--processes 2]
                                     [--page-size 500] [--workers 2] [--drains 2]
                                     [--raw-rows 2000000] [--pg-setting NAME=VALUE ...]

Per size, on a fresh database (and a fresh embedded PostgreSQL and Tansu broker unless
CHESSBOARD_DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS are set):

1. import: the simulator's "1m" preset sized to N objects (100 a project, 100 projects a developer)
   read by ApiPull and applied by P OS processes per stage (import_run.py, as import_bench.py
   --processes P); objects/s and CPU per object of PostgreSQL and of the worker processes, of the
   PropertyObjects stage; page p99 over the stage's pages;
2. table and index sizes (pg_relation_size / pg_indexes_size) of the replica tables, the outbox and
   the import's staging, right after the import;
3. the floor, in the same run: the imported objects COPYed into an empty copy of their table with
   its foreign keys, plus their outbox rows COPYed likewise; import/floor = import objects/s over
   objects/s of those two COPYs one after the other; the CPU per object of the import (PostgreSQL,
   workers, simulator) against the floor's (PostgreSQL's, of the COPYs), the import/floor it would
   reach on every core of the machine, and the workers' wait on the server by statement
   (IMPORT_BENCH_PROFILE=<dir>: a cProfile, on thread CPU time, of each PropertyObjects thread there);
4. recalc: every project's request made due, drained by --drains drain processes
   (recalc_bench.drain_in_processes): projects/s;
5. relay: the raw producer of outbox_bench.py on the first --raw-rows pending rows (what the relay
   would send, no database while timed), then one OutboxRelay until the outbox is empty:
   messages/s of each and relay/raw.

Then one table across sizes with the CPU per object (PostgreSQL + workers) relative to the smallest
size (issue target: within 20 % from 100k to 10M).

Before it starts it prints what each size needs (disk: bytes per object from constants of a small
run, then as measured at the first size; time) and refuses with one line, exit 2, when the disk of
PostgreSQL's data directory or of the temporary directory cannot hold the largest size.

The embedded PostgreSQL gets settings for a bulk load unless --pg-setting gives others (BULK_LOAD);
the settings in force are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text  # noqa: E402

from benchmarks import import_run, scale_plan, servers  # noqa: E402
from benchmarks.cpu import postmaster_pid, tree_cpu_seconds  # noqa: E402
from benchmarks.outbox_bench import CpuMeter, raw_producer  # noqa: E402
from benchmarks.recalc_bench import drain_in_processes  # noqa: E402
from pin_chessboard_pipelines.entities import ENTITIES  # noqa: E402
from pin_chessboard_pipelines.events.relay import OutboxRelay  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import free_port, start_tansu  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine  # noqa: E402

DATABASE = "chessboard_scale_bench"
BULK_LOAD = ["max_wal_size=8GB", "checkpoint_timeout=30min", "shared_buffers=2GB"]
SHOWN_SETTINGS = ("max_wal_size", "checkpoint_timeout", "shared_buffers", "synchronous_commit", "autovacuum")
STAGING = ("talent_import_pages", "talent_import_staged_pages")

SIZES_SQL = """
SELECT c.relname, pg_relation_size(c.oid) AS heap, pg_indexes_size(c.oid) AS indexes
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relname = ANY(:tables)
"""
DUE_NOW_SQL = "UPDATE chessboard.project_recalc_requests SET due_at = now() - interval '1 second'"
PENDING_SQL = "SELECT count(*) FROM chessboard.outbox_messages WHERE published_at IS NULL"


def _settings_line(url: str, settings: list[str], given: bool) -> str:
    names = list(dict.fromkeys([*SHOWN_SETTINGS, *(s.partition("=")[0].strip() for s in settings)]))
    with get_engine(url).connect() as conn:
        shown = ", ".join(f"{name}={conn.execute(text(f'SHOW {name}')).scalar_one()}" for name in names)
    if os.environ.get("CHESSBOARD_DATABASE_URL"):
        origin = "CHESSBOARD_DATABASE_URL's server, as configured"
    else:
        origin = "embedded, --pg-setting as given" if given else "embedded, bulk-load defaults"
    return f"PostgreSQL settings ({origin}): {shown}"


def _data_dir(url: str | None) -> str | None:
    """The PostgreSQL data directory to check: the temporary directory an embedded server will use,
    or the given server's when it is on this machine (None: elsewhere)."""
    if url is None:
        return tempfile.gettempdir()
    with get_engine(url).connect() as conn:
        path = conn.execute(text("SHOW data_directory")).scalar_one()
    return path if os.path.isdir(path) else None


def _refusal(need: scale_plan.Need, data_dir: str | None) -> str | None:
    tmp = tempfile.gettempdir()
    paths = [p for p in (data_dir, tmp) if p is not None]
    return scale_plan.refusal(
        need,
        data_dir,
        tmp,
        {p: shutil.disk_usage(p).free for p in paths},
        {p: os.stat(p).st_dev for p in paths},
    )


def _broker(keep: list) -> tuple[str, int | None]:
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given, None
    port = free_port()
    tansu = start_tansu(port)  # in-memory storage: a fresh broker per size frees it
    keep.append(tansu)
    return f"127.0.0.1:{port}", tansu.pid


def _table_sizes(
    url: str, schema: str = "chessboard", tables: list[str] | None = None
) -> dict[str, tuple[int, int]]:
    """(heap, indexes) bytes of the replica tables, the outbox and the staging (or of `tables`)."""
    tables = tables or [e.table for e in ENTITIES] + ["outbox_messages", *STAGING]
    with get_engine(url).connect() as conn:
        rows = conn.execute(text(SIZES_SQL), {"schema": schema, "tables": tables}).all()
    found = {name: (heap, indexes) for name, heap, indexes in rows}
    return {name: found[name] for name in tables if name in found}


def _database_bytes(url: str) -> int:
    with get_engine(url).connect() as conn:
        return conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()


def _copies_bytes(url: str) -> tuple[int, int]:
    """(heap + indexes, heap) bytes of the COPY references' tables there are now."""
    names = [f"{table}_copy" for table in ("property_objects", "outbox_messages")]
    sizes = _table_sizes(url, "public", names).values()
    return sum(heap + indexes for heap, indexes in sizes), sum(heap for heap, _ in sizes)


def _recalc(url: str, drains: int, batch_size: int) -> dict:
    with get_engine(url).begin() as conn:
        due = conn.execute(text(DUE_NOW_SQL)).rowcount
    postmaster = postmaster_pid(url)
    pg_before = tree_cpu_seconds(postmaster) if postmaster else float("nan")
    figures, seconds = drain_in_processes(url, drains, batch_size)
    pg_cpu = tree_cpu_seconds(postmaster) - pg_before if postmaster else float("nan")
    done = sum(f["recalculated"] for f in figures)
    failed = sum(f["failed"] for f in figures)
    if done != due or failed:
        raise SystemExit(f"scale_bench: the recalc drained {done} of {due} projects, {failed} failed")
    return {
        "projects": done,
        "seconds": seconds,
        "rate": done / seconds,
        "pg_cpu": pg_cpu,
        "drains_cpu": sum(f["cpu"] for f in figures),
        "in_transactions": sum(f["in_transactions"] for f in figures),
        "taken": sum(f["taken"] for f in figures),
    }


def _relay(url: str, bootstrap: str, broker_pid: int | None, raw_rows: int) -> dict:
    engine = get_engine(url)
    with engine.connect() as conn:
        pending = conn.execute(text(PENDING_SQL)).scalar_one()
    raw = raw_producer(url, bootstrap, broker_pid, limit=raw_rows)
    with OutboxRelay(engine, bootstrap) as relay:
        relay.prepare()  # topics ensured and the producer connected before the clock, as the raw one's
        with CpuMeter(url, broker_pid) as meter:
            result = relay.relay_pending(until_empty=True, max_seconds=6 * 3600)
    with engine.connect() as conn:
        left = conn.execute(text(PENDING_SQL)).scalar_one()
    if left or not result.complete:
        raise SystemExit(f"scale_bench: the relay left {left} of {pending} rows pending")
    return {
        "pending": pending,
        "relay_rate": result.messages_per_second,
        "relay_seconds": result.seconds,
        "raw_rows": raw["rows"],
        "raw_rate": raw["messages_per_second"],
        "relay_cpu": meter.line(pending),
        "raw_cpu": raw["cpu"],
    }


def _size(args: argparse.Namespace, objects: int, settings: list[str], first: bool) -> dict:
    """One size from the empty database to the empty outbox; its figures."""
    dataset = scale_plan.dataset_for(objects)
    keep: list = []
    started = time.perf_counter()
    url = import_run.database(keep, settings, DATABASE, "scale-bench-pg-")
    try:
        if first:
            print(_settings_line(url, settings, bool(args.pg_setting)), flush=True)
        sim, sim_url = import_run.simulator(dataset)
        try:
            run = import_run.import_on_processes(args, url, sim_url, args.processes, sim_pid=sim.pid)
        finally:
            sim.terminate()
            sim.wait(30)
        report = run["session"].reports["PropertyObjects"]
        stage_stats = run["stats"]["PropertyObjects"]
        figures: dict = {
            "objects": report.counters.planned,
            "import_seconds": run["seconds"],
            "rate": report.counters.planned / run["stages"]["PropertyObjects"],
            "cpu": run["stage_cpu"]["PropertyObjects"],
            "sim_cpu": run["stage_sim_cpu"]["PropertyObjects"],
            # the workers of a stage of a few items: what starting and joining P processes costs
            "start_cpu": run["stage_cpu"]["Developers"][1],
            "page_p99": import_run.percentile([d for w in stage_stats for d in w["page_durations_ms"]], 0.99),
            "pages": sum(w["pages"] for w in stage_stats),
            "stage_stats": stage_stats,
            "tables": _table_sizes(url),
        }
        after_import = _database_bytes(url)
        copies = []  # (total bytes, heap bytes) of each COPY reference's table, dropped before the next
        postmaster = postmaster_pid(url)
        floor_cpu = 0.0  # the server's CPU seconds of the two COPYs
        with tempfile.TemporaryDirectory(prefix="scale-bench-") as workdir:
            for key, table, where, foreign_keys in (
                ("copy_fk", "property_objects", "true", True),
                ("copy_outbox", *import_run.OUTBOX_ROWS, False),
            ):
                rows, seconds, cpu = import_run.timed_copy(
                    url, Path(workdir), table, where, foreign_keys, postmaster
                )
                figures[key] = (rows, seconds)
                floor_cpu += cpu
                copies.append(_copies_bytes(url))
                import_run.drop_copies(url)
        figures["floor_cpu"] = floor_cpu
        figures["recalc"] = _recalc(url, args.drains, args.drain_batch)
        brokers: list = []
        try:
            bootstrap, broker_pid = _broker(brokers)
            figures["relay"] = _relay(url, bootstrap, broker_pid, args.raw_rows)
        finally:
            for tansu in brokers:
                tansu.terminate()
                tansu.wait()
        # the peak: after the import with the larger COPY reference's table, or after the relay's marks
        figures["database_bytes"] = max(
            after_import + max(total for total, _ in copies), _database_bytes(url)
        )
        figures["dump_bytes"] = max(heap for _, heap in copies)  # a dump is about its table's heap
        figures["seconds"] = time.perf_counter() - started
        return figures
    finally:
        get_engine(url).dispose()
        if not keep:
            import_run.drop_database(url, DATABASE)
        for server in keep:  # its data directory goes with it: the next size has the disk
            server.cleanup()


def _net_workers_cpu(f: dict) -> float:
    """The PropertyObjects workers' CPU seconds less what starting them costs."""
    return max(0.0, f["cpu"][1] - f["start_cpu"])


def _block(f: dict) -> list[str]:
    objects = f["objects"]
    pg_cpu, workers_cpu = f["cpu"]
    net = _net_workers_cpu(f)
    fk_rows, fk_seconds = f["copy_fk"]
    outbox_rows, outbox_seconds = f["copy_outbox"]
    floor = fk_rows / (fk_seconds + outbox_seconds)
    recalc, relay = f["recalc"], f["relay"]
    total = sum(heap + indexes for heap, indexes in f["tables"].values())
    lines = [
        f"== {objects:,} objects ({f['seconds']:.0f} s in all, import {f['import_seconds']:.0f} s)",
        f"  import: {f['rate']:,.0f} objects/s; CPU per object PostgreSQL {pg_cpu / objects * 1e6:.0f} µs, "
        f"workers {workers_cpu / objects * 1e6:.0f} µs ({net / objects * 1e6:.0f} µs without the "
        f"{f['start_cpu']:.1f} s their starts cost, as the Developers stage's workers); "
        f"page p99 {f['page_p99']:.0f} ms ({f['pages']} pages)",
        f"  floor: COPY of the {fk_rows:,} objects with their foreign keys {fk_seconds:.1f} s + their "
        f"{outbox_rows:,} outbox rows {outbox_seconds:.1f} s = {floor:,.0f} objects/s; "
        f"import/floor {f['rate'] / floor:.3f}",
        _cpu_line(f),
        _statements_line(f),
        f"  sizes after the import (heap + indexes; {total / objects:,.0f} bytes per object in these tables, "
        f"database at its peak {scale_plan.human_bytes(f['database_bytes'])}):",
    ]
    lines += [
        f"    {name:<28} {scale_plan.human_bytes(heap):>9} + {scale_plan.human_bytes(indexes):>9}"
        for name, (heap, indexes) in f["tables"].items()
    ]
    lines += [
        f"  recalc: {recalc['projects']:,} projects in {recalc['seconds']:.1f} s = {recalc['rate']:,.0f} projects/s; "
        f"CPU per project PostgreSQL {recalc['pg_cpu'] / recalc['projects'] * 1e3:.1f} ms, the drains "
        f"{recalc['drains_cpu'] / recalc['projects'] * 1e3:.1f} ms; {recalc['in_transactions']:.1f} s inside "
        f"their transactions, {recalc['taken']} rows taken by the other drain",
        f"  relay: {relay['pending']:,} messages in {relay['relay_seconds']:.1f} s = {relay['relay_rate']:,.0f} "
        f"messages/s; raw producer {relay['raw_rate']:,.0f} messages/s (its first {relay['raw_rows']:,} rows); "
        f"relay/raw {relay['relay_rate'] / relay['raw_rate']:.2f}",
        "    relay: " + relay["relay_cpu"].replace("\n  ", "\n      "),
        "    raw producer: " + relay["raw_cpu"].replace("\n  ", "\n      "),
    ]
    return lines


def _cpu_line(f: dict) -> str:
    """The import's CPU per object against the floor's: the import/floor ratio the import would reach
    using every core with nothing else running (the floor is one connection on one core)."""
    objects, cores = f["objects"], os.cpu_count() or 1
    pg, sim, floor = f["cpu"][0] / objects * 1e6, f["sim_cpu"] / objects * 1e6, f["floor_cpu"] / objects * 1e6
    workers = _net_workers_cpu(f) / objects * 1e6
    total = pg + workers + sim
    fk_rows, fk_seconds = f["copy_fk"]
    floor_rate = fk_rows / (fk_seconds + f["copy_outbox"][1])
    return (
        f"  CPU per object: import {total:.0f} µs (PostgreSQL {pg:.0f}, workers {workers:.0f}, simulator "
        f"{sim:.0f}), {total * f['rate'] / 1e6:.2f} of {cores} cores busy with it; floor {floor:.0f} µs "
        f"(PostgreSQL's, of the two COPYs), PostgreSQL's excess over it {pg - floor:.0f} µs; on {cores} "
        f"cores of its own the import would reach {cores / total * 1e6:,.0f} objects/s = "
        f"{cores / total * 1e6 / floor_rate:.2f} of the floor"
    )


def _statements_line(f: dict) -> str:
    """Where the PropertyObjects workers waited on the server: wall µs per object by statement kind."""
    seconds: dict[str, float] = {}
    for worker in f["stage_stats"]:
        for kind, spent in worker["statement_seconds"].items():
            seconds[kind] = seconds.get(kind, 0.0) + spent
    statements = sum(w["statements"] for w in f["stage_stats"])
    top = sorted(seconds.items(), key=lambda kv: -kv[1])[:8]
    shown = ", ".join(f"{kind} {spent / f['objects'] * 1e6:.0f}" for kind, spent in top)
    if import_run.PING_KIND not in dict(top):  # the pool's pings, however small (store/engine.py)
        shown += f"; {import_run.PING_KIND} {seconds.get(import_run.PING_KIND, 0.0) / f['objects'] * 1e6:.1f}"
    shown += f"; all {sum(seconds.values()) / f['objects'] * 1e6:.0f}"
    return (
        f"  the workers' wait on the server per object ({statements / max(1, f['pages']):.1f} statements a "
        f"page), µs: {shown}"
    )


def _table(runs: list[dict]) -> list[str]:
    cpus = [(f["cpu"][0] + _net_workers_cpu(f)) / f["objects"] * 1e6 for f in runs]
    relative = scale_plan.relative(cpus)
    lines = [
        f"{'objects':>12} {'objects/s':>10} {'PG µs/obj':>10} {'workers µs':>11} {'CPU/obj rel':>12} "
        f"{'page p99 ms':>12} {'recalc/s':>9} {'relay/s':>9} {'raw/s':>9} {'relay/raw':>10} {'import/floor':>13}"
    ]
    for f, rel in zip(runs, relative, strict=True):
        pg_cpu = f["cpu"][0]
        fk_rows, fk_seconds = f["copy_fk"]
        floor = fk_rows / (fk_seconds + f["copy_outbox"][1])
        relay = f["relay"]
        lines.append(
            f"{f['objects']:>12,} {f['rate']:>10,.0f} {pg_cpu / f['objects'] * 1e6:>10.0f} "
            f"{_net_workers_cpu(f) / f['objects'] * 1e6:>11.0f} {rel:>12.2f} {f['page_p99']:>12.0f} "
            f"{f['recalc']['rate']:>9,.0f} {relay['relay_rate']:>9,.0f} {relay['raw_rate']:>9,.0f} "
            f"{relay['relay_rate'] / relay['raw_rate']:>10.2f} {f['rate'] / floor:>13.3f}"
        )
    lines.append(
        "workers µs: the PropertyObjects stage's worker processes, without their starts; CPU/obj rel: "
        "(PostgreSQL + workers) CPU per object over the smallest size's (target <= 1.20 at 10M)"
    )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", default="100000,1000000,10000000", help="sizes, comma separated")
    parser.add_argument("--processes", type=int, default=2, help="worker processes per stage (the best P)")
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2, help="page threads per worker process")
    parser.add_argument("--drains", type=int, default=2, help="recalc drain processes")
    parser.add_argument("--drain-batch", type=int, default=50)
    parser.add_argument(
        "--raw-rows",
        type=int,
        default=2_000_000,
        help="rows the raw producer reads into memory and sends: the first pending rows when there are "
        "more (memory bounds it; a sample of a few hundred thousand rows or more gives a steady figure)",
    )
    servers.add_pg_setting_argument(parser)
    args = parser.parse_args()
    servers.check_pg_settings(parser, args)
    try:
        sizes = scale_plan.parse_sizes(args.objects)
        settings = args.pg_setting or ([] if os.environ.get("CHESSBOARD_DATABASE_URL") else BULK_LOAD)
        wal_bytes = scale_plan.max_wal_size(settings)
    except ValueError as error:
        print(f"scale_bench: {error}", file=sys.stderr)
        return 2
    data_dir = _data_dir(os.environ.get("CHESSBOARD_DATABASE_URL"))
    rates = scale_plan.Rates()
    print(
        f"scale_bench: {len(sizes)} size(s), P={args.processes}, page size {args.page_size}, "
        f"{args.drains} drain(s); needs (PostgreSQL data on {data_dir or 'a server elsewhere: not checked'}, "
        f"temporary files on {tempfile.gettempdir()}):"
    )
    needs = [
        scale_plan.need(scale_plan.dataset_objects(scale_plan.dataset_for(n)), rates, wal_bytes)
        for n in sizes
    ]
    for need in needs:
        print("  " + scale_plan.need_line(need, rates))
    print(f"  in all about {scale_plan.human_seconds(sum(n.seconds for n in needs))}", flush=True)
    runs: list[dict] = []
    for index, objects in enumerate(sizes):
        need = scale_plan.need(scale_plan.dataset_objects(scale_plan.dataset_for(objects)), rates, wal_bytes)
        if index:
            print("  next: " + scale_plan.need_line(need, rates), flush=True)
        line = _refusal(max(needs, key=lambda n: n.objects) if not index else need, data_dir)
        if line:
            print(line, file=sys.stderr)
            return 2
        figures = _size(args, objects, settings, first=not index)
        runs.append(figures)
        rates = scale_plan.Rates(
            database_bytes=figures["database_bytes"] / figures["objects"],
            dump_bytes=figures["dump_bytes"] / figures["objects"],
            seconds=figures["seconds"] / figures["objects"],
            measured_at=figures["objects"],
        )
        print("\n".join(_block(figures)), flush=True)
    print("\n".join(_table(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The machinery of the import benchmarks (import_bench.py, scale_bench.py): a fresh database, the
Talent simulator in a process of its own, the bootstrap worked on by P OS processes per stage with
the CPU of PostgreSQL and of the workers, and the COPY references the import is measured against.

Run as a script it is one worker process of `import_on_processes` (the code a Dagster page step
runs: join the run, claim pages, one walker per stage under its walk lock).
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

from benchmarks import servers  # noqa: E402
from benchmarks.cpu import postmaster_pid, tree_cpu_seconds  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import admin_execute, ensure_database, free_port, wait_for_port  # noqa: E402
from pin_chessboard_pipelines.store.engine import libpq_url, with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402
from pin_chessboard_pipelines.talent_import.request import RunStatus, build_request  # noqa: E402
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession  # noqa: E402
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource  # noqa: E402


def database(keep: list, settings: list[str], name: str, prefix: str) -> str:
    """A fresh, migrated database `name`: on CHESSBOARD_DATABASE_URL's server when set, else on a
    new embedded PostgreSQL with `settings` (appended to `keep`, which keeps it alive)."""
    given = os.environ.get("CHESSBOARD_DATABASE_URL")
    if given:
        admin = with_database(given, "postgres")
    else:
        server = servers.embedded_postgres(prefix, settings)
        keep.append(server)
        admin = server.get_uri()
    admin_execute(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    url = ensure_database(admin, name)
    upgrade(url)
    return url


def drop_database(url: str, name: str) -> None:
    admin_execute(with_database(url, "postgres"), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def simulator(overrides: dict[str, int]) -> tuple[subprocess.Popen, str]:
    """`pin-chessboard talent-sim serve` on the "1m" preset with `overrides` (key=value), and its URL."""
    port = free_port()
    sets = [arg for key, value in overrides.items() for arg in ("--set", f"{key}={value}")]
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
            *sets,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={k: v for k, v in os.environ.items() if k != "TALENT_API_TOKEN"},
    )
    wait_for_port("127.0.0.1", port, timeout=60)
    return proc, f"http://127.0.0.1:{port}"


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def copy_reference(
    url: str, workdir: Path, table: str = "property_objects", where: str = "true", foreign_keys: bool = False
) -> tuple[int, float]:
    """(rows, seconds) of COPY FROM of the imported rows of `table` (those `where` holds) into an
    empty copy of it (same indexes, no checks; `foreign_keys`: with the table's foreign keys too,
    checked row by row as the replica's own are)."""
    rows, seconds, _ = timed_copy(url, workdir, table, where, foreign_keys)
    return rows, seconds


def timed_copy(
    url: str,
    workdir: Path,
    table: str = "property_objects",
    where: str = "true",
    foreign_keys: bool = False,
    postmaster: int | None = None,
) -> tuple[int, float, float]:
    """copy_reference's (rows, seconds) and the CPU seconds the server spent on the COPY FROM
    (`postmaster`'s processes; NaN without it)."""
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
        cpu_before = tree_cpu_seconds(postmaster) if postmaster else float("nan")
        started = time.perf_counter()
        with conn, conn.cursor() as cur, dump.open() as source:
            cur.copy_expert(f"COPY {copy_table} FROM STDIN", source)
        seconds = time.perf_counter() - started
        cpu = (tree_cpu_seconds(postmaster) - cpu_before) if postmaster else float("nan")
        with conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {copy_table}")
            rows = cur.fetchone()[0]
    finally:
        conn.close()
        dump.unlink(missing_ok=True)
    return rows, seconds, cpu


OUTBOX_ROWS = ("outbox_messages", "topic LIKE 'pin.chessboard.property-object%'")


def outbox_reference(url: str, workdir: Path) -> tuple[int, float]:
    """The same for the property objects' outbox rows (upserted, price and status events): the
    part of the import's work that the contract fixes besides the objects themselves."""
    return copy_reference(url, workdir, *OUTBOX_ROWS)


def drop_copies(url: str) -> None:
    """The tables copy_reference left behind."""
    import psycopg2

    conn = psycopg2.connect(libpq_url(url))
    try:
        with conn, conn.cursor() as cur:
            for table in ("property_objects", "outbox_messages"):
                cur.execute(f"DROP TABLE IF EXISTS public.{table}_copy")
    finally:
        conn.close()


class CountingSource(ApiPullSource):
    """The Talent API, counting the pages read again by cursor (the walk's reads are the listing)."""

    fetched = 0

    def fetch_page(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        type(self).fetched += 1
        return super().fetch_page(*args, **kwargs)


PING_KIND = "SELECT 1 (the pool's ping)"


def statement_kind(sql: str) -> str:
    """A statement's verb and the first chessboard table it names: what its time is filed under."""
    words = " ".join(sql.split())
    verb = next((w for w in words.split() if w in {"SELECT", "INSERT", "UPDATE", "DELETE", "COPY"}), "?")
    table = re.search(r"chessboard\.\"?(\w+)", words)
    if table:
        return f"{verb} {table.group(1)}"
    return PING_KIND if words.upper() == "SELECT 1" else words[:40]


def count_statements(engine) -> tuple[list[int], dict[str, float]]:  # type: ignore[no-untyped-def]
    """Every statement and COPY this process sends through the engine's connections (SQLAlchemy's
    and the raw bulk cursors alike, pool pings included), and the wall seconds spent in each kind
    (statement_kind): a cursor class that counts and times."""
    import psycopg2.extensions
    import psycopg2.sql
    from sqlalchemy import event

    counter = [0]
    seconds: dict[str, float] = {}

    def timed(sql, call):  # type: ignore[no-untyped-def]
        counter[0] += 1
        started = time.perf_counter()
        try:
            return call()
        finally:
            kind = statement_kind(str(sql))
            seconds[kind] = seconds.get(kind, 0.0) + time.perf_counter() - started

    class CountingCursor(psycopg2.extensions.cursor):
        def execute(self, query, vars=None):  # type: ignore[no-untyped-def]
            # a statement composed with identifiers (store/cursor.py with_identifiers) by its text
            named = query.as_string(self) if isinstance(query, psycopg2.sql.Composable) else query
            return timed(named, lambda: super(CountingCursor, self).execute(query, vars))

        def copy_expert(self, sql, file, size=8192):  # type: ignore[no-untyped-def]
            return timed(sql, lambda: super(CountingCursor, self).copy_expert(sql, file, size))

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record):  # type: ignore[no-untyped-def]
        dbapi_connection.cursor_factory = CountingCursor

    return counter, seconds


def _profile_threads(directory: Path) -> None:
    """Every thread this process starts from now on runs under cProfile, its figures to `directory`;
    the clock is the thread's CPU time, so waits for the server or for a core count nothing."""
    import cProfile
    import threading

    run = threading.Thread.run

    def profiled(thread: threading.Thread) -> None:
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        try:
            run(thread)
        finally:
            profiler.disable()
            profiler.dump_stats(str(directory / f"{os.getpid()}-{thread.name}.prof"))

    threading.Thread.run = profiled  # type: ignore[method-assign]


def _worker(args: argparse.Namespace) -> int:
    """One process's share of one stage (what a Dagster page step does); its figures to --stats."""
    from pin_chessboard_pipelines.entities import BY_STAGE

    session = ImportSession(
        args.url,
        build_request(page_size=args.page_size, workers=args.workers, correlation_id=args.correlation_id),
        CountingSource(args.sim_url),
        options=ImportOptions(lock_timeout_seconds=5),
    )
    statements, statement_seconds = count_statements(session.engine)
    profile_dir = os.environ.get("IMPORT_BENCH_PROFILE")  # a directory: a cProfile of each thread there
    if profile_dir and args.worker == "PropertyObjects":
        _profile_threads(Path(profile_dir))
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
                "page_durations_ms": report.page_durations_ms,
                "fetched": CountingSource.fetched,
            }
        )
    )
    return 0


def import_on_processes(
    args: argparse.Namespace, url: str, sim_url: str, processes: int, sim_pid: int | None = None
) -> dict:
    """The bootstrap with `processes` worker processes per stage (`args.page_size`, `args.workers`
    threads each); the stages one after another. Per stage: seconds, CPU of PostgreSQL and of the
    workers, what the server did, each worker's figures; the simulator's CPU (`sim_pid`)."""
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
    sim_cpu: dict[str, float] = {}  # stage -> the simulator's CPU seconds (NaN without sim_pid)
    server: dict[str, dict[str, float]] = {}  # stage -> what PostgreSQL did (servers.SERVER_COUNTERS)
    postmaster = postmaster_pid(url)
    try:
        for stage in ENTITIES:
            stage_started = time.perf_counter()
            pg_before = tree_cpu_seconds(postmaster) if postmaster else float("nan")
            sim_before = tree_cpu_seconds(sim_pid) if sim_pid else float("nan")
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
            sim_cpu[stage.stage] = (tree_cpu_seconds(sim_pid) - sim_before) if sim_pid else float("nan")
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
        "stage_sim_cpu": sim_cpu,
        "stage_server": server,
        "url": url,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", required=True, help="the stage this process works on")
    parser.add_argument("--url", required=True)
    parser.add_argument("--sim-url", required=True)
    parser.add_argument("--correlation-id", required=True)
    parser.add_argument("--page-size", type=int, required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--stats", required=True, help="where this process's figures go")
    return _worker(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())

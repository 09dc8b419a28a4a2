"""The recalc job's fan-out on the multiprocess executor (forkserver): how soon a run's first drain
starts, what a step's start costs, and how many steps the run lists.

    python benchmarks/fan_out_bench.py [--runs 3] [--drains 1,3]

Runs the real `project_aggregates_recalc` job (defs/recalc/definitions.py) on an empty queue
(`until_empty`, so each drain ends at once) in a temporary Dagster instance, on
CHESSBOARD_DATABASE_URL's server (a scratch database, created and dropped) or a throw-away embedded
PostgreSQL. Per drain count, `--runs` runs; printed, medians over the runs:

- first drain: the run's start (RUN_START) -> its first drain step's STEP_START, seconds;
- step start: a step's "step worker starting" -> its STEP_START (p50 over every step), seconds;
- run: the run's wall time, seconds;
- steps: the steps the run lists (every step with an event), of them skipped ("Not executed").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import dagster as dg  # noqa: E402
from recalc_bench import _pct, scratch_server  # noqa: E402

import pin_chessboard_pipelines.definitions  # noqa: E402,F401  (what a step of the code location imports)
from pin_chessboard_pipelines.cli.jobs import DEFINITIONS_MODULE as DEFINITIONS  # noqa: E402
from pin_chessboard_pipelines.defs.executors import MULTIPROCESS_EXECUTOR  # noqa: E402
from pin_chessboard_pipelines.defs.recalc.definitions import drain_run_config, recalc_job  # noqa: E402
from pin_chessboard_pipelines.defs.resources import ChessboardResource  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import admin_execute  # noqa: E402
from pin_chessboard_pipelines.store.engine import with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402

FIRST_DRAIN = "drain_0"  # the first drain step, before and after the fan-out became dynamic


def drain_job() -> dg.JobDefinition:
    """The job as a step process rebuilds it (the store's URL from CHESSBOARD_DATABASE_URL)."""
    return recalc_job(resource_defs={"chessboard": ChessboardResource()}).with_executor_def(
        MULTIPROCESS_EXECUTOR
    )


def _run(instance: dg.DagsterInstance, drains: int) -> dict[str, float]:
    run_config = drain_run_config(drains, {"until_empty": True})
    execution = run_config.setdefault("execution", {"config": {}})["config"]
    execution["start_method"] = {"forkserver": {"preload_modules": [DEFINITIONS]}}
    started = time.perf_counter()
    with dg.execute_job(dg.reconstructable(drain_job), instance=instance, run_config=run_config) as result:
        assert result.success
        run_id = result.run_id
    wall = time.perf_counter() - started
    run_start = first_drain = None
    starting: dict[str, float] = {}
    startup: list[float] = []
    steps: set[str] = set()
    skipped: set[str] = set()
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.RUN_START:
            run_start = record.timestamp
        if event.step_key is None:
            continue
        steps.add(event.step_key)
        if event.event_type == dg.DagsterEventType.STEP_SKIPPED:
            skipped.add(event.step_key)
        elif event.event_type == dg.DagsterEventType.STEP_WORKER_STARTING:
            starting[event.step_key] = record.timestamp
        elif event.event_type == dg.DagsterEventType.STEP_START:
            if event.step_key in starting:
                startup.append(record.timestamp - starting[event.step_key])
            if event.step_key == FIRST_DRAIN:
                first_drain = record.timestamp
    assert run_start is not None and first_drain is not None
    return {
        "first": first_drain - run_start,
        "startup": statistics.median(startup),
        "wall": wall,
        "steps": len(steps),
        "skipped": len(skipped),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per drain count (default 3)")
    parser.add_argument("--drains", default="1,3", help="drain counts (default 1,3)")
    args = parser.parse_args()
    counts = [int(n) for n in args.drains.split(",")]
    server_url, server = scratch_server("fan-out-bench")
    database = f"fan_out_bench_{uuid.uuid4().hex[:8]}"
    admin_execute(server_url, f'CREATE DATABASE "{database}"')
    url = with_database(server_url, database)
    os.environ["CHESSBOARD_DATABASE_URL"] = url  # the step processes' store
    try:
        upgrade(url)
        print(f"fan_out_bench: {os.cpu_count()} CPU(s), {args.runs} run(s) per drain count")
        print(
            f"{'drains':>6} {'first drain s':>14} {'step start s':>13} {'run s':>6} {'steps':>6} {'skipped':>8}"
        )
        with (
            tempfile.TemporaryDirectory(prefix="fan-out-bench-") as home,
            dg.instance_for_test(temp_dir=home) as instance,
        ):
            for drains in counts:
                runs = [_run(instance, drains) for _ in range(args.runs)]

                def median(key: str, runs: list[dict[str, float]] = runs) -> float:
                    return _pct([run[key] for run in runs], 0.5)

                print(
                    f"{drains:>6} {median('first'):>14.2f} {median('startup'):>13.2f} {median('wall'):>6.1f} "
                    f"{median('steps'):>6.0f} {median('skipped'):>8.0f}"
                )
    finally:
        admin_execute(server_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if server is not None:
            server.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())

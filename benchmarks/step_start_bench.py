"""Step start-up on the multiprocess executor: `spawn` (Dagster's default) against the project's
`forkserver` (defs/executors.py), with the project's definitions imported by every step.

    python benchmarks/step_start_bench.py [--runs 3]

The job has the import's shape without its work: six stages one after another, each a plan step,
three page steps at once (an import on `processes: 3`) and a finish step: 30 steps. Its steps do nothing; the
module that defines it imports `pin_chessboard_pipelines.definitions`, so a step process loads
what a real step of the code location loads. Per start method, `--runs` runs in one temporary
Dagster instance, the methods alternating; printed: the run's wall time and the start-up of a step
(Dagster's "step worker starting" event to its "step start" event), p50 and p90, and the ratio of
forkserver to spawn.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dagster as dg  # noqa: E402

import pin_chessboard_pipelines.definitions  # noqa: E402,F401  (what a step of the code location imports)
from pin_chessboard_pipelines.cli.jobs import DEFINITIONS_MODULE as DEFINITIONS  # noqa: E402
from pin_chessboard_pipelines.defs.executors import MULTIPROCESS_EXECUTOR  # noqa: E402

STAGES = 6
PAGE_STEPS = 3


def stage_job() -> dg.JobDefinition:
    """The job; a step process rebuilds it (dg.reconstructable)."""

    @dg.op(ins={"after": dg.In(dg.Nothing)}, out=dg.Out(dg.Nothing))
    def step() -> None:
        """Nothing: only the step's start and end are measured."""

    @dg.job(executor_def=MULTIPROCESS_EXECUTOR)
    def stages() -> None:
        done: list = []
        for n in range(STAGES):
            plan = step.alias(f"plan_{n}")(after=done)
            pages = [step.alias(f"pages_{n}_{k}")(after=[plan]) for k in range(PAGE_STEPS)]
            done = [step.alias(f"finish_{n}")(after=pages)]

    return stages


def _run(instance: dg.DagsterInstance, start_method: str) -> tuple[float, list[float]]:
    """(wall seconds, start-up seconds of each step) of one run."""
    # a job of the code location is loaded from the definitions' module, which the forkserver
    # preloads by itself; this one comes from a file, so the module is named
    method = (
        {"forkserver": {"preload_modules": [DEFINITIONS]}} if start_method == "forkserver" else {"spawn": {}}
    )
    run_config = {"execution": {"config": {"max_concurrent": PAGE_STEPS, "start_method": method}}}
    started = time.perf_counter()
    with dg.execute_job(dg.reconstructable(stage_job), instance=instance, run_config=run_config) as result:
        assert result.success
        run_id = result.run_id
    wall = time.perf_counter() - started
    starting: dict[str, float] = {}
    startup: list[float] = []
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or event.step_key is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_WORKER_STARTING:
            starting[event.step_key] = record.timestamp
        elif event.event_type == dg.DagsterEventType.STEP_START and event.step_key in starting:
            startup.append(record.timestamp - starting[event.step_key])
    return wall, startup


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per start method (default 3)")
    args = parser.parse_args()
    methods = ("spawn", "forkserver")
    walls: dict[str, list[float]] = {m: [] for m in methods}
    startups: dict[str, list[float]] = {m: [] for m in methods}
    with (
        tempfile.TemporaryDirectory(prefix="step-start-bench-") as home,
        dg.instance_for_test(temp_dir=home) as instance,
    ):
        for _ in range(args.runs):
            for method in methods:
                wall, startup = _run(instance, method)
                walls[method].append(wall)
                startups[method].extend(startup)
    steps = STAGES * (PAGE_STEPS + 2)
    print(f"{STAGES} stages x (plan, {PAGE_STEPS} page steps, finish) = {steps} steps, {args.runs} runs each")
    print(f"{'start method':<13} {'run s (median)':>15} {'step start p50 s':>17} {'p90 s':>7}")
    for method in methods:
        print(
            f"{method:<13} {statistics.median(walls[method]):>15.1f} "
            f"{_p(startups[method], 0.5):>17.2f} {_p(startups[method], 0.9):>7.2f}"
        )
    ratio = statistics.median(walls["forkserver"]) / statistics.median(walls["spawn"])
    print(f"forkserver / spawn, run time: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

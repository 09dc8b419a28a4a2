"""What `make demo` shows once the services and the Dagster UI are up.

Each step is an ordinary `pin-chessboard` command, run the way an operator would run it, so the
demo doubles as a smoke test of the command line. The runs land in the Dagster UI's history.
"""

from __future__ import annotations

import subprocess
import sys

from pin_chessboard_pipelines.settings import Settings

DEMO_STEPS: list[tuple[str, list[str]]] = [
    ("the chessboard store schema", ["db", "upgrade"]),
    # talent-initial-import of the simulator's demo dataset: one Dagster run over every developer
    ("the talent initial import", ["import"]),
    # project-aggregates-recalc, after the import: the daemon's sensor drains the queue as rows
    # come due (debounce), then the stored aggregates are checked against count/min/max.
    ("the recalc queue draining", ["recalc", "status", "--wait", "180", "--projects", "5"]),
    ("the aggregates against their formulas", ["recalc", "audit"]),
    # the analysts' first view: today's project_inventory_daily (a run of its job in the UI)
    ("today's inventory for the analysts", ["inventory"]),
    # the outbox relay: the sensor's sweeps publish as rows come; this publishes whatever is left
    ("the outbox relayed to Kafka", ["outbox", "relay", "--until-empty"]),
    ("events arriving on the pin.chessboard topics", ["outbox", "events", "--last", "5"]),
    # handbook-sync: the handbook service renames Moscow; every live project in region 77 is
    # republished with the new regionSnapshot (docs/store.md#handbook-sync)
    (
        "a region renamed in the handbook",
        ["talent-sim", "rename", "--region", "77", "--name", "Город Москва"],
    ),
    ("handbook-sync republishing its projects", ["handbook-sync", "--until-idle", "--time-budget", "120"]),
    ("the renamed region on project-upserted", ["outbox", "events", "--last", "3"]),
]


def run_demo(settings: Settings) -> None:  # noqa: ARG001
    for title, args in DEMO_STEPS:
        print(f"\n=== {title}: pin-chessboard {' '.join(args)}", flush=True)
        result = subprocess.run([sys.executable, "-m", "pin_chessboard_pipelines.cli", *args], check=False)
        if result.returncode != 0:
            print(f"=== exit code {result.returncode}", flush=True)

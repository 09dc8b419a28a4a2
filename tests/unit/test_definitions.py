"""The Dagster definitions load cleanly, and their shape is pinned by a snapshot.

An intended change of the asset graph, jobs, sensors or checks: rerun with UPDATE_SNAPSHOTS=1 and
review the diff of tests/snapshots/definitions.txt.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import dagster as dg

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "definitions.txt"


def describe(defs: dg.Definitions) -> str:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    lines: list[str] = []
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        parents = ", ".join(sorted(p.to_user_string() for p in node.parent_keys))
        partitions = (
            node.partitions_def.name
            if isinstance(node.partitions_def, dg.DynamicPartitionsDefinition)
            else (type(node.partitions_def).__name__ if node.partitions_def else "-")
        )
        lines.append(f"asset {key.to_user_string()} <- [{parents}] partitions={partitions}")
    for check_key in sorted(graph.asset_check_keys, key=lambda k: (k.asset_key.to_user_string(), k.name)):
        lines.append(f"check {check_key.asset_key.to_user_string()}:{check_key.name}")
    for job in sorted(repo.get_all_jobs(), key=lambda j: j.name):
        if not job.name.startswith("__"):
            lines.append(f"job {job.name}")
    for sensor in sorted(repo.sensor_defs, key=lambda s: s.name):
        status = sensor.default_status.value if sensor.default_status else "-"
        lines.append(f"sensor {sensor.name} interval={sensor.minimum_interval_seconds} default={status}")
    for schedule in sorted(repo.schedule_defs, key=lambda s: s.name):
        lines.append(f"schedule {schedule.name} {schedule.cron_schedule}")
    return "\n".join(lines) + "\n"


def test_definitions_load_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from pin_chessboard_pipelines.definitions import build_definitions

        defs = build_definitions()
        defs.get_repository_def().load_all_definitions()


def test_definitions_match_the_snapshot():
    from pin_chessboard_pipelines.definitions import defs as load_defs

    defs = load_defs()

    current = describe(defs)
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(current)
    assert SNAPSHOT.exists(), f"{SNAPSHOT} is missing: UPDATE_SNAPSHOTS=1 writes it"
    assert current == SNAPSHOT.read_text()


def test_the_module_builds_no_definitions_on_import():
    """`defs` is a @dg.definitions loader: importing the module (as the multiprocess executor's
    forkserver does) builds nothing, and the location's loader returns the Definitions."""
    import pin_chessboard_pipelines.definitions as module

    assert not isinstance(module.defs, dg.Definitions)
    assert isinstance(module.defs(), dg.Definitions)


def test_every_job_has_the_same_snapshot_in_every_process():
    """A CLI run is re-executed from the UI without a version warning only when the job's snapshot
    id in the CLI process equals the code server's: nothing in a job may depend on the hash seed."""
    import subprocess
    import sys

    program = (
        "from pin_chessboard_pipelines.definitions import build_definitions\n"
        "repo = build_definitions().get_repository_def()\n"
        "print(sorted((j.name, j.get_job_snapshot_id()) for j in repo.get_all_jobs()))\n"
    )
    snapshots = [
        subprocess.run(
            [sys.executable, "-c", program],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert snapshots[0] == snapshots[1]

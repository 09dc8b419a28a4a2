"""The Dagster definitions load cleanly, and their shape is pinned by a snapshot of `dg list defs`.

tests/snapshots/definitions.json is `dg list defs --json` on the project ([tool.dg] in pyproject.toml)
without the prose (descriptions) and the source lines, with what dg does not print added to its
entries from the same code location: an asset's partitions and freshness policy, a sensor's interval
and default status. An intended change of the assets, checks, jobs, schedules, sensors or resources:
rerun with UPDATE_SNAPSHOTS=1 and review the diff of the snapshot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import dagster as dg

from pin_chessboard_pipelines.settings import PROJECT_ROOT

SNAPSHOT = Path(__file__).parent.parent / "snapshots" / "definitions.json"
DG = Path(sys.executable).parent / "dg"  # dagster-dg-cli, the dev extra's
UNSTABLE = ("description", "source")  # prose, and line numbers that move with every edit


def dg_list_defs(dagster_home: Path) -> dict[str, Any]:
    """`dg list defs --json` run on the checkout, on a DAGSTER_HOME of Dagster's local storage."""
    assert DG.exists(), f"{DG} is missing: dagster-dg-cli (the dev extra) is installed by `make install`"
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    done = subprocess.run(
        [str(DG), "list", "defs", "--json"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(dagster_home), "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _partitions(partitions_def: dg.PartitionsDefinition | None) -> str | None:
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition):
        return partitions_def.name
    return type(partitions_def).__name__ if partitions_def else None


def normalise(listed: dict[str, Any], defs: dg.Definitions) -> dict[str, Any]:
    """`listed` (dg list defs --json) without UNSTABLE, each section in a stable order, and what dg
    does not print taken from `defs`, the definitions it listed."""
    specs = {spec.key.to_user_string(): spec for spec in defs.resolve_all_asset_specs()}
    sensors = {sensor.name: sensor for sensor in defs.get_repository_def().sensor_defs}
    sections: dict[str, Any] = {}
    for section, entries in sorted(listed.items()):
        kept = [{k: v for k, v in entry.items() if k not in UNSTABLE} for entry in entries]
        for entry in kept:
            if section == "assets":
                spec = specs[entry["asset_key"]]
                entry["partitions"] = _partitions(spec.partitions_def)
                # its kind (the windows: test_inventory_freshness.py)
                policy = spec.freshness_policy
                entry["freshness_policy"] = type(policy).__name__ if policy else None
            elif section == "sensors":
                sensor = sensors[entry["name"]]
                entry["minimum_interval_seconds"] = sensor.minimum_interval_seconds
                entry["default_status"] = sensor.default_status.value
        sections[section] = sorted(kept, key=lambda e: json.dumps(e, sort_keys=True))
    return sections


def test_definitions_load_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from pin_chessboard_pipelines.definitions import build_definitions

        defs = build_definitions()
        defs.get_repository_def().load_all_definitions()


def test_definitions_match_the_snapshot(tmp_path):
    from pin_chessboard_pipelines.definitions import build_definitions

    current = (
        json.dumps(normalise(dg_list_defs(tmp_path), build_definitions()), indent=2, sort_keys=True) + "\n"
    )
    if os.environ.get("UPDATE_SNAPSHOTS"):
        SNAPSHOT.write_text(current)
    assert SNAPSHOT.exists(), f"{SNAPSHOT} is missing: UPDATE_SNAPSHOTS=1 writes it"
    assert current == SNAPSHOT.read_text()


def test_the_snapshot_names_every_definition_of_the_code_location():
    """What dg lists is the whole code location: one entry per asset, check, job, schedule and sensor."""
    from pin_chessboard_pipelines.definitions import build_definitions

    repo = build_definitions().get_repository_def()
    snapshot = json.loads(SNAPSHOT.read_text())
    assert {a["asset_key"] for a in snapshot["assets"]} == {
        key.to_user_string() for key in repo.asset_graph.get_all_asset_keys()
    }
    assert {c["key"] for c in snapshot["asset_checks"]} == {
        f"{key.asset_key.to_user_string()}:{key.name}" for key in repo.asset_graph.asset_check_keys
    }
    assert {j["name"] for j in snapshot["jobs"]} == {
        job.name for job in repo.get_all_jobs() if not job.name.startswith("__")
    }
    assert {s["name"] for s in snapshot["schedules"]} == {s.name for s in repo.schedule_defs}
    assert {s["name"] for s in snapshot["sensors"]} == {s.name for s in repo.sensor_defs}


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

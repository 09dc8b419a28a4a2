"""End to end: a real Dagster daemon ticks the recalc sensor, which launches the drain job; the
queue empties and the aggregates are written (docs/project-aggregates-recalc.md#drain: the 5 s worker tick)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest

from pin_chessboard_pipelines.defs.recalc.definitions import DRAIN_TAG, JOB_NAME, SENSOR_NAME
from pin_chessboard_pipelines.recalc.audit import audit
from tests.support.recalc_data import StoreBuilder, queue, standard_project

DAGSTER_YAML = """\
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 2
    tag_concurrency_limits:
      - key: "pin/recalc-drain"
        limit: 2
run_launcher:
  module: dagster.core.launcher
  class: DefaultRunLauncher
telemetry:
  enabled: false
"""

# The recalc domain with the root's resource and executor (other domains stay out of this test).
DEFINITIONS = """\
import dagster as dg
from pin_chessboard_pipelines.defs.recalc.definitions import definitions
from pin_chessboard_pipelines.defs.resources import ChessboardResource

defs = dg.Definitions.merge(
    definitions(),
    dg.Definitions(resources={"chessboard": ChessboardResource()}, executor=dg.in_process_executor),
)
"""


@pytest.mark.slow
def test_daemon_sensor_tick_drains_the_queue(db_url, engine, tmp_path):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b) for _ in range(3)]
        for p in projects:
            b.request(p)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(DAGSTER_YAML)
    defs_file = tmp_path / "recalc_defs.py"
    defs_file.write_text(textwrap.dedent(DEFINITIONS))
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "CHESSBOARD_DATABASE_URL": db_url,
        # the drain run ends with its 10 s time slot
        "CHESSBOARD_RECALC_DRAIN_LIFETIME_SECONDS": "10",
        "CHESSBOARD_RECALC_DRAIN_LEAD_SECONDS": "2",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
    }
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-f", str(defs_file)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "daemon.log").open("w"),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if not queue(conn):
                    break
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(0.5)
        with engine.connect() as conn:
            assert queue(conn) == {}, (tmp_path / "daemon.log").read_text()[-3000:]
            assert audit(conn) == []
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_runs(filters=dg.RunsFilter(job_name=JOB_NAME))
            assert runs
            run = runs[-1]
            assert run.tags.get(DRAIN_TAG) == "recalc-drain"
            assert run.tags.get("dagster/sensor_name") == SENSOR_NAME
            # the run may still be finishing its bookkeeping after the commit
            status_deadline = time.monotonic() + 60
            while run.status not in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE):
                assert time.monotonic() < status_deadline, run.status
                time.sleep(0.5)
                run = instance.get_run_by_id(run.run_id)
            assert run.status == dg.DagsterRunStatus.SUCCESS
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()

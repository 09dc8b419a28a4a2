"""An import launched as an operator does it, on the standard deployment (webserver + daemon on the
project's dagster.yaml, CHESSBOARD_DAGSTER_EXECUTOR=multiprocess): talent_full_bootstrap through
GraphQL with `processes: 2`. A real Prometheus scrapes `pin-chessboard metrics serve` every second:
`chessboard_import_running` is 1 while the import's page steps run (they hold the run by heartbeat,
not by the advisory lock, which the first step releases), `chessboard_import_processes` sees the
page processes, and both gauges read 0 once the run ended; the pages counter agrees with the store.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import pin_chessboard_pipelines.observability as observability
from pin_chessboard_pipelines.defs.talent_import.bootstrap import BOOTSTRAP_OP
from pin_chessboard_pipelines.defs.talent_import.config import BOOTSTRAP_JOB, IMPORT_JOB
from pin_chessboard_pipelines.runtime.embedded import free_port
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.dagster_stack import DagsterStack, stack_with_simulator
from tests.support.polling import wait_until
from tests.support.prometheus import Prometheus, prometheus_scraping

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# 40 PropertyObjects pages of 3 at 60 ms a read: the stage lasts long enough for many scrapes
SPEC = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=30, latency_ms=60)
PROCESSES = 2
RULES = sorted((Path(observability.__file__).parent / "rules").glob("*.yml"))


@pytest.fixture(scope="module")
def stack(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[DagsterStack]:
    multiprocess = {"CHESSBOARD_DAGSTER_EXECUTOR": "multiprocess"}
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, SPEC, multiprocess) as (
        started,
        _,
    ):
        yield started


@pytest.fixture
def prometheus(stack: DagsterStack) -> Iterator[Prometheus]:
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", "metrics", "serve", "--port", str(port)],
        env=stack.env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    try:
        assert serve.stdout is not None and serve.stdout.readline().startswith("metrics on ")
        with prometheus_scraping(f"127.0.0.1:{port}", RULES) as scraping:
            yield scraping
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def _value(prometheus: Prometheus, promql: str) -> float | None:
    try:
        return prometheus.value(promql)
    except OSError:  # a busy machine may reset one HTTP request: the deadline still holds
        return None


def _pages_done(url: str) -> float:
    with get_engine(url).connect() as conn:
        return float(
            conn.execute(
                sa.text("SELECT count(*) FROM chessboard.talent_import_pages WHERE status = 'Done'")
            ).scalar_one()
        )


def test_a_ui_launched_import_reads_running_while_it_runs(stack: DagsterStack, prometheus: Prometheus):
    wait_until(lambda: _value(prometheus, "max(chessboard_store_up)") == 1, 60, "store up")
    assert _value(prometheus, "max(chessboard_import_running)") == 0

    bootstrap_id = stack.graphql.launch_job(
        BOOTSTRAP_JOB,
        run_config={
            "ops": {BOOTSTRAP_OP: {"config": {"processes": PROCESSES, "workers": 1, "page_size": 3}}}
        },
    )
    assert stack.graphql.wait_for_run(bootstrap_id, timeout=240)["status"] == "SUCCESS", stack.log_tail()
    [launched] = stack.graphql.runs(tags={"pin/launched-by": bootstrap_id})
    assert launched["jobName"] == IMPORT_JOB

    # while the import's steps run: the gauge is 1 and the processes holding pages are seen
    wait_until(
        lambda: _value(prometheus, "max(chessboard_import_running)") == 1,
        240,
        "chessboard_import_running == 1 during the UI-launched import",
    )
    assert stack.graphql.run(launched["runId"])["status"] in ("STARTING", "STARTED")
    wait_until(
        lambda: (_value(prometheus, "max_over_time(chessboard_import_processes[5m])") or 0) >= 1,
        240,
        "a page process seen",
    )
    assert stack.graphql.wait_for_run(launched["runId"], timeout=600)["status"] == "SUCCESS", stack.log_tail()

    # ended: both gauges at 0, the run row Completed, the counter equal to the store's pages
    wait_until(lambda: _value(prometheus, "max(chessboard_import_running)") == 0, 60, "running back to 0")
    wait_until(lambda: _value(prometheus, "max(chessboard_import_runs_running)") == 0, 60, "no Running row")
    done = _pages_done(stack.chessboard_url)
    assert done > 40
    wait_until(
        lambda: _value(prometheus, 'sum(chessboard_import_pages_total{status="Done"})') == done,
        60,
        f"pages Done counter == {done}",
    )
    # the rule a lock-based gauge broke: a healthy UI-launched import's INTERRUPTED expression was
    # true for its whole run (pending, then firing after 10 minutes); here it never was
    interrupted = 'max_over_time(ALERTS{alertname="CHESSBOARD_IMPORT_INTERRUPTED"}[15m])'
    assert prometheus.value(interrupted) is None

"""An import launched as an operator does it, on the standard deployment (webserver + daemon on the
project's dagster.yaml, CHESSBOARD_DAGSTER_EXECUTOR=multiprocess): talent_full_bootstrap through
GraphQL with `processes: 2`. A real Prometheus scrapes `pin-chessboard metrics serve` every second:
`chessboard_import_running` is 1 while the import's page steps run (they hold the run by heartbeat,
not by the advisory lock, which the first step releases), `chessboard_import_processes` sees the
page processes, and both gauges read 0 once the run ended; the pages counter agrees with the store.
The import rules, replayed by promtool on the recorded series, stay quiet for this healthy import.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

import pin_chessboard_pipelines.observability as observability
from pin_chessboard_pipelines.defs.talent_import.bootstrap import BOOTSTRAP_OP
from pin_chessboard_pipelines.defs.talent_import.config import BOOTSTRAP_JOB, IMPORT_JOB
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.dagster_stack import DagsterStack, stack_with_simulator
from tests.support.polling import wait_until
from tests.support.prometheus import Prometheus, metrics_serve, prometheus_binary, prometheus_scraping

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("test_prometheus_ui_import"),  # its own stack: one worker
]

# 40 PropertyObjects pages of 3 at 60 ms a read: the stage lasts long enough for many scrapes
SPEC = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=30, latency_ms=60)
PROCESSES = 2
RULES_DIR = Path(observability.__file__).parent / "rules"
RULES = sorted(RULES_DIR.glob("*.yml"))
REPLAY_SPEEDUP = 10


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
    with (
        metrics_serve(dict(stack.env), PROJECT_ROOT) as target,
        prometheus_scraping(target, RULES) as scraping,
    ):
        yield scraping


def _value(prometheus: Prometheus, promql: str) -> float | None:
    try:
        return prometheus.value(promql)
    except OSError:  # a busy machine may reset one HTTP request: the deadline still holds
        return None


def _pages_done(url: str, stage: str | None = None) -> float:
    with get_engine(url).connect() as conn:
        return float(
            conn.execute(
                sa.text(
                    "SELECT count(*) FROM chessboard.talent_import_pages WHERE status = 'Done' "
                    "AND (CAST(:stage AS text) IS NULL OR stage = :stage)"
                ),
                {"stage": stage},
            ).scalar_one()
        )


def test_a_ui_launched_import_reads_running_while_it_runs(
    stack: DagsterStack, prometheus: Prometheus, tmp_path: Path
):
    """The series Prometheus recorded are then replayed to promtool, ten replayed seconds per
    scraped second, so that the import outlasts the rules' windows: neither STUCK nor INTERRUPTED
    fires for it."""
    began = time.time()
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
    _replayed_rules_stay_quiet(prometheus, tmp_path, began)


# the series the import rules read, as the rules aggregate them
RECORDED = {
    "chessboard_import_running": "max(chessboard_import_running)",
    "chessboard_import_runs_running": "max(chessboard_import_runs_running)",
    'chessboard_import_pages_total{status="Done"}': 'sum(chessboard_import_pages_total{status="Done"})',
}


def _replayed_rules_stay_quiet(prometheus: Prometheus, folder: Path, began: float) -> None:
    end = time.time()
    series = []
    for name, promql in RECORDED.items():
        data = prometheus.api("query_range", query=promql, start=f"{began:.0f}", end=f"{end:.0f}", step="1")
        (result,) = data["result"]
        by_second = {int(float(t)) - int(began): v for t, v in result["values"]}
        values = " ".join(by_second.get(i, "_") for i in range(int(end) - int(began) + 1))
        series.append({"series": name, "values": values})
    # one scraped second = ten replayed seconds: the import lasts more than 10 replayed minutes,
    # and a pause of the healthy import (a stage's barrier, step starts, the run's last steps) stays
    # well inside STUCK's 10-minute window
    minutes = (int(end) - int(began)) * REPLAY_SPEEDUP // 60
    assert minutes > 11, "the replayed import must outlast the rules' 10-minute windows"
    cases = [
        {"eval_time": f"{at}m", "alertname": alert, "exp_alerts": []}
        for at in range(1, minutes + 1)
        for alert in ("CHESSBOARD_IMPORT_STUCK", "CHESSBOARD_IMPORT_INTERRUPTED")
    ]
    test = {
        "rule_files": [str(RULES_DIR / "import_alerts.yml")],
        "evaluation_interval": f"{REPLAY_SPEEDUP}s",
        "tests": [{"interval": f"{REPLAY_SPEEDUP}s", "input_series": series, "alert_rule_test": cases}],
    }
    (folder / "replayed_test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        [prometheus_binary("promtool"), "test", "rules", str(folder / "replayed_test.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr

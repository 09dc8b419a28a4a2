"""An import launched as an operator does it, on the standard deployment (webserver + daemon on the
project's dagster.yaml, CHESSBOARD_DAGSTER_EXECUTOR=multiprocess): talent_full_bootstrap through
GraphQL with `processes: 2`. A real Prometheus scrapes `pin-chessboard metrics serve` every second:
`chessboard_import_running` is 1 while the import's page steps run (they hold the run by heartbeat,
not by the advisory lock, which the first step releases), `chessboard_import_processes` sees the
page processes, and both gauges read 0 once the run ended; the pages counter agrees with the store.
The import rules, replayed by promtool on the recorded series, stay quiet for this healthy import;
for an import whose Talent API hangs, STUCK fires and INTERRUPTED does not (its processes live).
The Prometheus graph of the healthy import is saved as docs/prometheus-ui-import.png.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import time
import urllib.parse
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
from pin_chessboard_pipelines.talent.simulator.server import SimulatorServer
from tests.support.browser import chromium_page, screenshot_when_settled
from tests.support.dagster_stack import DagsterStack, stack_with_simulator
from tests.support.polling import wait_until
from tests.support.prometheus import Prometheus, metrics_serve, prometheus_binary, prometheus_scraping

pytestmark = [
    pytest.mark.slow,
    pytest.mark.long,
    pytest.mark.timeout(900),
    pytest.mark.xdist_group("test_prometheus_ui_import"),  # its own stack: one worker
]

# 40 PropertyObjects pages of 3 at 60 ms a read: the stage lasts long enough for many scrapes
SPEC = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=30, latency_ms=60)
PROCESSES = 2
RULES_DIR = Path(observability.__file__).parent / "rules"
RULES = sorted(RULES_DIR.glob("*.yml"))
REPLAYED_MINUTES = 12  # the replayed import outlasts the rules' 10-minute windows
DOCS = PROJECT_ROOT / "docs"
# a hang: each Talent answer takes longer than TALENT_API_TIMEOUT_SECONDS (30 s), so every read
# times out and is retried (within the 600-second page budget) while the processes stay alive
HANG_MS = 35_000
HANG_SECONDS = 60  # scraped; replayed at HANG_SPEEDUP it outlasts STUCK's 10 minutes and its 1m
HANG_SPEEDUP = 20


@pytest.fixture(scope="module")
def stack_and_simulator(
    pg_server_url: str, pg_template_url: str, kafka_bootstrap: str
) -> Iterator[tuple[DagsterStack, SimulatorServer]]:
    multiprocess = {"CHESSBOARD_DAGSTER_EXECUTOR": "multiprocess"}
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, SPEC, multiprocess) as started:
        yield started


@pytest.fixture
def stack(stack_and_simulator: tuple[DagsterStack, SimulatorServer]) -> DagsterStack:
    return stack_and_simulator[0]


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


def _done(url: str) -> tuple[float, float]:
    """Done pages and the items they counted (applied, skipped, failed), from the store."""
    with get_engine(url).connect() as conn:
        pages, items = conn.execute(
            sa.text(
                "SELECT count(*), coalesce(sum(items_applied + items_skipped + items_failed), 0) "
                "FROM chessboard.talent_import_pages WHERE status = 'Done'"
            )
        ).one()
    return float(pages), float(items)


def _launch_bootstrap(stack: DagsterStack) -> str:
    """talent_full_bootstrap through GraphQL, as the launchpad does; the import run it launched."""
    bootstrap_id = stack.graphql.launch_job(
        BOOTSTRAP_JOB,
        run_config={
            "ops": {BOOTSTRAP_OP: {"config": {"processes": PROCESSES, "workers": 1, "page_size": 3}}}
        },
    )
    assert stack.graphql.wait_for_run(bootstrap_id, timeout=240)["status"] == "SUCCESS", stack.log_tail()
    [launched] = stack.graphql.runs(tags={"pin/launched-by": bootstrap_id})
    assert launched["jobName"] == IMPORT_JOB
    return launched["runId"]


def test_a_ui_launched_import_reads_running_while_it_runs(
    stack: DagsterStack, prometheus: Prometheus, tmp_path: Path
):
    """The series Prometheus recorded are then replayed to promtool, stretched to 12 minutes so that
    the import outlasts the rules' windows: neither STUCK nor INTERRUPTED fires for it."""
    began = time.time()
    wait_until(lambda: _value(prometheus, "max(chessboard_store_up)") == 1, 60, "store up")
    assert _value(prometheus, "max(chessboard_import_running)") == 0
    run_id = _launch_bootstrap(stack)

    # while the import's steps run: the gauge is 1 and the processes holding pages are seen
    wait_until(
        lambda: _value(prometheus, "max(chessboard_import_running)") == 1,
        240,
        "chessboard_import_running == 1 during the UI-launched import",
    )
    assert stack.graphql.run(run_id)["status"] in ("STARTING", "STARTED")
    wait_until(
        lambda: (_value(prometheus, "max_over_time(chessboard_import_processes[5m])") or 0) >= 1,
        240,
        "a page process seen",
    )
    assert stack.graphql.wait_for_run(run_id, timeout=600)["status"] == "SUCCESS", stack.log_tail()

    # ended: both gauges at 0, the run row Completed, the counter equal to the store's pages
    wait_until(lambda: _value(prometheus, "max(chessboard_import_running)") == 0, 60, "running back to 0")
    wait_until(lambda: _value(prometheus, "max(chessboard_import_runs_running)") == 0, 60, "no Running row")
    done, items = _done(stack.chessboard_url)
    assert done > 40
    wait_until(
        lambda: _value(prometheus, 'sum(chessboard_import_pages_total{status="Done"})') == done,
        60,
        f"pages Done counter == {done}",
    )
    # every step process counted its items into the store, the page steps' processes included
    wait_until(
        lambda: _value(prometheus, "sum(chessboard_import_items_total)") == items,
        60,
        f"items counter == {items}",
    )
    _replayed_rules_stay_quiet(prometheus, tmp_path, began)
    _graph_screenshot(prometheus, began)


def _graph_screenshot(prometheus: Prometheus, began: float) -> None:
    """Prometheus's graph page over the import: the running gauge, the pages rate, the processes
    and the recalc lag after it (the drains the sensor starts once the import released its
    projects). A picture for docs/, not an assertion."""
    wait_until(
        lambda: (_value(prometheus, "sum(chessboard_recalc_event_lag_seconds_count)") or 0) > 0,
        120,
        "the recalc of the imported projects",
    )
    minutes = int((time.time() - began) // 60) + 2
    panels = (
        "max(chessboard_import_running)",
        'sum(rate(chessboard_import_pages_total{status="Done"}[15s]))',
        "max(chessboard_import_processes)",
        "histogram_quantile(0.99, sum by (le) (rate(chessboard_recalc_event_lag_seconds_bucket[1m])))",
    )
    query = "&".join(
        f"g{i}.expr={urllib.parse.quote(expr)}&g{i}.tab=0&g{i}.range_input={minutes}m"
        for i, expr in enumerate(panels)
    )
    with chromium_page(1400, 2300) as page:
        page.goto(f"{prometheus.url}/graph?{query}")
        page.locator("canvas, .graph-chart, svg").first.wait_for()
        time.sleep(2)
        # the page focuses its last query field: the picture shows all four from the top
        page.evaluate("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
        screenshot_when_settled(page, DOCS / "prometheus-ui-import.png")


def test_a_hanging_ui_import_is_stuck_not_interrupted(
    stack_and_simulator: tuple[DagsterStack, SimulatorServer], prometheus: Prometheus, tmp_path: Path
):
    """The Talent API hangs mid-import for a scraped minute: the run stays live (its processes renew
    the heartbeat while their reads time out and are retried) and finishes no page. Replayed at
    HANG_SPEEDUP, STUCK fires once the window holds no page Done; INTERRUPTED never does."""
    stack, simulator = stack_and_simulator
    began = time.time()
    wait_until(lambda: _value(prometheus, "max(chessboard_store_up)") == 1, 60, "store up")
    run_id = _launch_bootstrap(stack)
    before, _ = _done(stack.chessboard_url)
    wait_until(lambda: _done(stack.chessboard_url)[0] > before + 2, 240, "the import's first pages")
    simulator.set_spec(dataclasses.replace(SPEC, latency_ms=HANG_MS))
    try:
        hang_began = time.time()
        time.sleep(HANG_SECONDS)
        assert _value(prometheus, "max(chessboard_import_running)") == 1  # alive all along
        hang_ended = time.time()
    finally:
        simulator.set_spec(SPEC)
    assert stack.graphql.wait_for_run(run_id, timeout=600)["status"] == "SUCCESS", stack.log_tail()

    series = _recorded_series(prometheus, began, hang_ended)
    done = [float(v) if v != "_" else None for v in series['chessboard_import_pages_total{status="Done"}']]
    # the last second whose pages Done grew: the flat stretch starts there
    last_growth = max(
        i
        for i in range(1, len(done))
        if done[i] is not None and done[i - 1] is not None and done[i] > done[i - 1]
    )
    assert last_growth <= int(hang_began - began) + 40, "pages kept being finished during the hang"
    flat_from = last_growth * HANG_SPEEDUP  # replayed seconds
    stuck_at = flat_from + 10 * 60 + 90  # the window holds no growth, then `for: 1m`
    end = (len(done) - 1) * HANG_SPEEDUP
    assert stuck_at < end, "the hang must outlast STUCK's window in the replay"
    stuck = _rule(RULES_DIR / "import_alerts.yml", "CHESSBOARD_IMPORT_STUCK")
    cases = [
        {"eval_time": f"{flat_from + 5 * 60}s", "alertname": "CHESSBOARD_IMPORT_STUCK", "exp_alerts": []},
        {"eval_time": f"{stuck_at}s", "alertname": "CHESSBOARD_IMPORT_STUCK", "exp_alerts": [stuck]},
    ] + [
        {"eval_time": f"{at}s", "alertname": "CHESSBOARD_IMPORT_INTERRUPTED", "exp_alerts": []}
        for at in range(60, end + 1, 60)
    ]
    _promtool(tmp_path, series, cases, HANG_SPEEDUP)


def _rule(path: Path, alert: str) -> dict:
    """The alert as promtool expects it fired: the rule's labels and annotations (no template)."""
    for group in yaml.safe_load(path.read_text())["groups"]:
        for rule in group["rules"]:
            if rule.get("alert") == alert:
                return {"exp_labels": rule.get("labels", {}), "exp_annotations": rule.get("annotations", {})}
    raise AssertionError(f"no alert {alert} in {path}")


# the series the import rules read, as the rules aggregate them
RECORDED = {
    "chessboard_import_running": "max(chessboard_import_running)",
    "chessboard_import_runs_running": "max(chessboard_import_runs_running)",
    'chessboard_import_pages_total{status="Done"}': 'sum(chessboard_import_pages_total{status="Done"})',
}


def _recorded_series(prometheus: Prometheus, began: float, end: float) -> dict[str, list[str]]:
    """Each recorded series as the rules aggregate it, one value per scraped second ('_': none)."""
    series = {}
    for name, promql in RECORDED.items():
        data = prometheus.api("query_range", query=promql, start=f"{began:.0f}", end=f"{end:.0f}", step="1")
        (result,) = data["result"]
        by_second = {int(float(t)) - int(began): v for t, v in result["values"]}
        series[name] = [by_second.get(i, "_") for i in range(int(end) - int(began) + 1)]
    return series


def _promtool(folder: Path, series: dict[str, list[str]], cases: list[dict], speedup: int) -> None:
    """promtool replays the series, one scraped second = `speedup` replayed seconds."""
    test = {
        "rule_files": [str(RULES_DIR / "import_alerts.yml")],
        "evaluation_interval": f"{speedup}s",
        "tests": [
            {
                "interval": f"{speedup}s",
                "input_series": [
                    {"series": name, "values": " ".join(values)} for name, values in series.items()
                ],
                "alert_rule_test": cases,
            }
        ],
    }
    (folder / "replayed_test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        [prometheus_binary("promtool"), "test", "rules", str(folder / "replayed_test.yml")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _replayed_rules_stay_quiet(prometheus: Prometheus, folder: Path, began: float) -> None:
    series = _recorded_series(prometheus, began, time.time())
    # the recorded import is replayed at the speed that stretches it to REPLAYED_MINUTES, no faster:
    # a pause of the healthy import (a stage's barrier, step starts on a loaded machine, the run's
    # last steps) must last more than 10 / 12 of the whole import to reach STUCK's window
    seconds = len(next(iter(series.values()))) - 1
    speedup = max(1, math.ceil(REPLAYED_MINUTES * 60 / seconds))
    minutes = seconds * speedup // 60
    assert minutes > 11, "the replayed import must outlast the rules' 10-minute windows"
    cases = [
        {"eval_time": f"{at}m", "alertname": alert, "exp_alerts": []}
        for at in range(1, minutes + 1)
        for alert in ("CHESSBOARD_IMPORT_STUCK", "CHESSBOARD_IMPORT_INTERRUPTED")
    ]
    _promtool(folder, series, cases, speedup)

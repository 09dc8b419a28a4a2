"""observability/dashboards/chessboard-overview.json: every PromQL expression parses (promtool)
and names only metrics the exporter exposes; the panels the jobs' docs ask for are there."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

import pin_chessboard_pipelines.observability as observability
from pin_chessboard_pipelines.observability.exporter import exposed_names
from tests.support.prometheus import prometheus_binary

DASHBOARD = Path(observability.__file__).parent / "dashboards" / "chessboard-overview.json"
# Grafana's range variables, replaced by a duration for parsing
GRAFANA_VARIABLES = re.compile(r"\$__(range|rate_interval|interval)\b|\$\{__(range|rate_interval|interval)\}")


def dashboard_expressions() -> dict[str, str]:
    """`<panel title>/<refId>` -> PromQL, with Grafana's variables replaced."""
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    out = {}
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            out[f"{panel['title']}/{target['refId']}"] = GRAFANA_VARIABLES.sub("5m", target["expr"])
    return out


def test_the_dashboard_is_well_formed():
    doc = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert doc["uid"] == "chessboard-overview" and doc["title"] == "chessboard-overview"
    ids = [panel["id"] for panel in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}"


def test_every_expression_parses(tmp_path):
    """promtool parses each expression as the expression of a recording rule."""
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:expr_{i}", "expr": expr}
                    for i, expr in enumerate(dashboard_expressions().values())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    done = subprocess.run(
        [prometheus_binary("promtool"), "check", "rules", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("where", sorted(dashboard_expressions()))
def test_expressions_name_only_exposed_metrics(where):
    expr = dashboard_expressions()[where]
    names = set(re.findall(r"\b[a-z_][a-z0-9_]*_[a-z0-9_]+\b(?=\s*[{\[)])", expr)) - {"histogram_quantile"}
    names |= set(re.findall(r"\bchessboard_[a-z0-9_]+", expr))
    assert names, (where, expr)
    assert names <= exposed_names(), (where, sorted(names - exposed_names()))


def test_the_panels_the_docs_ask_for():
    exprs = " ".join(dashboard_expressions().values())
    for metric in (
        'chessboard_import_pages_total{status="Done"}',  # progress by stage
        "chessboard_import_throughput_items_per_sec",
        "chessboard_import_failed_items_total",
        "chessboard_recalc_queue_depth",
        "chessboard_recalc_due_backlog",
        "chessboard_recalc_poison_rows",
        "histogram_quantile(0.99, sum by (le) (rate(chessboard_recalc_process_duration_seconds_bucket",
        "sum by (result) (rate(chessboard_recalc_runs_total",
        "sum by (entity) (rate(chessboard_recalc_republished_total",
        "chessboard_outbox_backlog",
        "chessboard_outbox_lag_seconds",
        "max by (consumer) (chessboard_consumer_dead_letters_waiting)",
        "sum by (consumer) (increase(chessboard_sync_failed_items_total",
    ):
        assert metric in exprs, metric


def test_a_fresh_deployment_exposes_every_dashboard_metric():
    """No process has recorded anything yet (no stored sample): every series a panel names
    is exposed, at 0, so the dashboard reads 0 instead of "No data" until each job has run once."""
    from prometheus_client import generate_latest

    from pin_chessboard_pipelines.observability.exporter import STORE_GAUGES, build_registry

    registry = build_registry(lambda: [], lambda: {gauge.name: 0.0 for gauge in STORE_GAUGES})
    samples = {}
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    names = {name.split("{", 1)[0] for name in samples}
    wanted = set()
    for expr in dashboard_expressions().values():
        wanted |= set(re.findall(r"\bchessboard_[a-z0-9_]+", expr))
    # series whose label values are open (a topic, an unknown enum value) appear with the first one;
    # the waiting dead letters are read from the broker, and appear with its first answer
    open_labels = {
        "chessboard_consumer_dead_letters_total",
        "chessboard_consumer_dead_letters_waiting",
        "chessboard_outbox_published_total",
        "chessboard_sync_unknown_enum_total",
        "chessboard_sync_unresolved_reference_total",
    }
    assert wanted - open_labels <= names, sorted(wanted - open_labels - names)
    assert samples['chessboard_recalc_runs_total{result="error"}'] == 0
    assert samples['chessboard_recalc_event_lag_seconds_bucket{le="+Inf"}'] == 0
    assert samples['chessboard_talent_sync_messages_total{result="applied",stage="Projects"}'] == 0
    assert samples["chessboard_talent_sync_lag_messages"] == 0

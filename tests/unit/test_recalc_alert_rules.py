"""The shipped Prometheus rules: the structure promtool checks, and only metrics that exist."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import pin_chessboard_pipelines.observability as observability
from pin_chessboard_pipelines.observability import metrics
from pin_chessboard_pipelines.observability.exporter import STORE_GAUGES  # read at scrape time

RULES = Path(observability.__file__).parent / "rules" / "recalc_alerts.yml"
DURATION = re.compile(r"^\d+[smhd]$")


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    assert set(doc) == {"groups"}
    rules = []
    for group in doc["groups"]:
        assert set(group) <= {"name", "interval", "rules"} and group["name"]
        rules += group["rules"]
    return rules


def _known_metrics() -> set[str]:
    names = set(STORE_GAUGES)
    for value in vars(metrics).values():
        name = getattr(value, "_name", None)
        kind = getattr(value, "_type", None)
        if not name:
            continue
        if kind == "counter":
            names |= {f"{name}_total", name}
        elif kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
        else:
            names.add(name)
    return names


def test_every_rule_is_well_formed():
    rules = _rules()
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, rule
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
        assert isinstance(rule["expr"], str) and rule["expr"].strip()
        assert rule["expr"].count("(") == rule["expr"].count(")")
        if "for" in rule:
            assert DURATION.match(rule["for"])
        assert all(isinstance(v, str) for v in rule.get("labels", {}).values())
        assert all(isinstance(v, str) for v in rule.get("annotations", {}).values())


def test_the_seed_alerts_are_all_there():
    alerts = {rule["alert"]: rule for rule in _rules()}
    assert {"CHESSBOARD_RECALC_BACKLOG", "CHESSBOARD_RECALC_POISON"} <= set(alerts)
    exprs = " ".join(rule["expr"] for rule in alerts.values())
    assert 'chessboard_recalc_runs_total{result="error"}' in exprs  # error growth
    assert "chessboard_recalc_process_duration_seconds_bucket" in exprs  # p99 > SLO
    assert "chessboard_recalc_last_tick_timestamp_seconds" in exprs  # no ticks for 2 intervals
    assert alerts["CHESSBOARD_RECALC_BACKLOG"]["for"] == "5m"


def test_rules_use_only_exported_metrics():
    known = _known_metrics()
    for rule in _rules():
        for name in re.findall(r"\bchessboard_[a-z0-9_]+", rule["expr"]):
            assert name in known, (rule["alert"], name)

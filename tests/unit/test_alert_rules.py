"""The shipped Prometheus rules: promtool checks them and runs their unit tests on synthetic series
(tests/unit/promtool/*_test.yml, labels and annotations); every alert carries a runbook that
exists; only exported metrics."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

import pin_chessboard_pipelines.observability as observability
from pin_chessboard_pipelines.observability.exporter import exposed_names
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from tests.support.prometheus import prometheus_binary

RULES = sorted((Path(observability.__file__).parent / "rules").glob("*.yml"))
PROMTOOL_TESTS = sorted((Path(__file__).parent / "promtool").glob("*_test.yml"))
ANNOTATIONS = {"summary", "description", "runbook", "runbook_url"}


def _alerts() -> list[dict]:
    return [
        rule
        for path in RULES
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
        for rule in group["rules"]
    ]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors of a markdown file."""
    anchors = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return anchors


def test_promtool_checks_every_rule_file():
    promtool = prometheus_binary("promtool")
    done = subprocess.run([promtool, "check", "rules", *map(str, RULES)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_unit_tests_pass():
    """The unit tests as they are, on the shipped rules: labels and rendered annotations expected."""
    promtool = prometheus_binary("promtool")
    tested = {
        (t.parent / rule_file).resolve()
        for t in PROMTOOL_TESTS
        for rule_file in yaml.safe_load(t.read_text())["rule_files"]
    }
    assert tested == {p.resolve() for p in RULES}, "every shipped rule file has its promtool test"
    done = subprocess.run(
        [promtool, "test", "rules", *map(str, PROMTOOL_TESTS)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_expected_alert_expects_its_annotations():
    for t in PROMTOOL_TESTS:
        for test in yaml.safe_load(t.read_text())["tests"]:
            for case in test.get("alert_rule_test", []):
                for alert in case.get("exp_alerts") or []:
                    assert set(alert.get("exp_annotations", {})) >= ANNOTATIONS, (t.name, case)


def test_every_alert_is_unit_tested():
    tested = {
        case["alertname"]
        for t in PROMTOOL_TESTS
        for test in yaml.safe_load(t.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in _alerts()} <= tested


def test_every_alert_has_a_runbook_that_exists():
    for rule in _alerts():
        annotations = rule.get("annotations", {})
        assert set(annotations) >= ANNOTATIONS, (rule["alert"], sorted(annotations))
        assert rule["labels"]["severity"] in ("warning", "critical")
        doc, _, anchor = annotations["runbook_url"].partition("#")
        assert anchor in _anchors((PROJECT_ROOT / doc).read_text(encoding="utf-8")), annotations[
            "runbook_url"
        ]


def test_the_jobs_alerts_are_all_there():
    alerts = {rule["alert"]: rule for rule in _alerts()}
    assert {
        "CHESSBOARD_IMPORT_STUCK",
        "CHESSBOARD_IMPORT_FAILED_ITEMS",
        "CHESSBOARD_IMPORT_SLOW",
        "CHESSBOARD_SYNC_UNKNOWN_ENUM",
        "CHESSBOARD_RECALC_BACKLOG",
        "CHESSBOARD_RECALC_POISON",
        "CHESSBOARD_RECALC_SLOW",
        "CHESSBOARD_RECALC_ERRORS",
        "CHESSBOARD_RECALC_STALLED",
        "CHESSBOARD_OUTBOX_LAG",
    } <= set(alerts)
    assert alerts["CHESSBOARD_RECALC_BACKLOG"]["for"] == "5m"
    assert "7200" in alerts["CHESSBOARD_IMPORT_SLOW"]["expr"]  # the 2 h bootstrap SLO


@pytest.mark.parametrize("path", RULES, ids=lambda p: p.name)
def test_rules_name_only_exported_metrics(path):
    known = exposed_names()
    for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            for name in re.findall(r"\bchessboard_[a-z0-9_]+", rule["expr"]):
                assert name in known, (rule["alert"], name)

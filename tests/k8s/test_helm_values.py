"""deploy/helm/values.yaml: valid for the chart's values schema, and the same instance settings as
the project's dagster.yaml (run limits, pools, log capture, run monitoring, sensors, retention).

The chart's schema (dagster-io/dagster, helm/dagster/values.schema.json) is read from
CHESSBOARD_HELM_SCHEMA, else ../shared/helm/dagster-chart/values.schema.json beside the checkout
(SOURCE.md there names its commit), else the pinned release pulled from the chart's repository
(tests/support/helm_chart.py); it is data kept outside the repository, never copied into it. The
schema test is skipped with one line naming what is missing when none of them is there.
What the chart renders from these values is tested in test_helm_chart.py.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from pin_chessboard_pipelines.settings import load_settings
from tests.support import helm_chart

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
# the chart's Kubernetes object schemas are remote (kubernetesjsonschema.dev): not fetched
REMOTE_REF = re.compile(r"^https?://")


def _values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def _dagster_yaml() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "dagster.yaml").read_text())


def _without_remote_refs_and_map_requirements(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as it applies to an override file: Helm merges a map of values.yaml into the
    chart's defaults (which hold the map's required keys), but a list replaces the chart's list, so
    an object in a list (and what it holds) must be complete. Remote $refs (Kubernetes objects) are
    left out."""
    definitions = schema.get("definitions", {})
    in_lists: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            items = node.get("items")
            if isinstance(items, dict) and str(items.get("$ref", "")).startswith("#/definitions/"):
                in_lists.add(items["$ref"].rsplit("/", 1)[1])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(schema)

    def refs(node: Any) -> set[str]:
        if isinstance(node, dict):
            found = {node["$ref"].rsplit("/", 1)[1]} if str(node.get("$ref", "")).startswith("#/") else set()
            return found.union(*(refs(value) for value in node.values()))
        if isinstance(node, list):
            return set().union(*(refs(value) for value in node))
        return set()

    pending = set(in_lists)  # and whatever an object in a list holds, transitively
    while pending:
        name = pending.pop()
        new = refs(definitions.get(name, {})) - in_lists
        in_lists |= new
        pending |= new

    def strip(node: Any, keep_required: bool) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str) and REMOTE_REF.match(value):
                    continue
                if key == "required" and not keep_required:
                    continue
                out[key] = strip(value, keep_required=False)
            return out
        if isinstance(node, list):
            return [strip(value, keep_required=False) for value in node]
        return node

    stripped = strip({k: v for k, v in schema.items() if k != "definitions"}, keep_required=False)
    stripped["definitions"] = {
        name: strip(body, keep_required=name in in_lists) for name, body in definitions.items()
    }
    return stripped


def test_values_validate_against_the_chart_schema():
    import json

    import jsonschema

    path = helm_chart.schema_path()
    assert path.is_file(), f"the chart's values schema is not at {path} (CHESSBOARD_HELM_SCHEMA)"
    schema = _without_remote_refs_and_map_requirements(json.loads(path.read_text()))
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(_values()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
    # and the check has teeth: a key the chart does not know, a wrong type
    wrong = _values()
    wrong["runLauncher"]["config"]["k8sRunLauncher"]["jobNamespaces"] = ["x"]
    wrong["dagster-user-deployments"]["deployments"][0]["port"] = "3030"
    messages = {e.message for e in validator.iter_errors(wrong)}
    assert any("jobNamespaces" in m for m in messages) and any(
        "'3030' is not of type 'integer'" in m for m in messages
    )


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def test_values_have_the_run_limits_pools_and_instance_settings_of_dagster_yaml():
    values, instance = _values(), _dagster_yaml()
    concurrency = values["concurrency"]
    assert concurrency["enabled"] is True
    assert set(concurrency) == {"enabled", "pools", "runs"}
    assert set(concurrency["pools"]) <= {"defaultLimit", "granularity", "opGranularityRunBuffer"}
    assert set(concurrency["runs"]) <= {"maxConcurrentRuns", "tagConcurrencyLimits"}
    assert {_snake(k): v for k, v in concurrency["pools"].items()} == instance["concurrency"]["pools"]
    runs = concurrency["runs"]
    assert runs["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
    assert runs["tagConcurrencyLimits"] == instance["concurrency"]["runs"]["tag_concurrency_limits"]
    # the limits are under `concurrency` only: Dagster refuses them under the run coordinator too
    assert values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"] == {}

    assert {_snake(k): v for k, v in values["pythonLogs"].items()} == instance["python_logs"]
    monitoring = {_snake(k): v for k, v in values["dagsterDaemon"]["runMonitoring"].items()}
    # a run pod that died is resumed in a new pod (K8sRunLauncher's; dagster.yaml's launcher cannot)
    assert monitoring.pop("max_resume_run_attempts") == 3
    assert monitoring == instance["run_monitoring"]
    retries = {_snake(k): v for k, v in values["dagsterDaemon"]["runRetries"].items()}
    assert retries == instance["run_retries"]
    assert {_snake(k): v for k, v in values["dagsterDaemon"]["sensors"].items()} == instance["sensors"]
    for kind in ("sensor", "schedule"):
        days = dict(values["retention"][kind]["purgeAfterDays"])
        assert days.pop("started") == -1
        assert days == instance["retention"][kind]["purge_after_days"]
    assert values["telemetry"] == instance["telemetry"]


def test_values_deploy_the_definitions_of_this_project_from_its_image():
    values = _values()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["codeServerArgs"] == ["--module-name", pyproject["tool"]["dagster"]["module_name"]]
    assert deployment["image"] == {
        "repository": "pin-chessboard-pipelines",
        "tag": pyproject["project"]["version"],
        "pullPolicy": "IfNotPresent",
    }
    assert "pin-chessboard-pipelines:" + pyproject["project"]["version"] in (ROOT / "Dockerfile").read_text()
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    assert values["runLauncher"]["type"] == "K8sRunLauncher"


def test_values_environment_is_valid_project_configuration_without_secrets():
    (deployment,) = _values()["dagster-user-deployments"]["deployments"]
    env = {item["name"]: item["value"] for item in deployment["env"]}
    settings = load_settings(env)  # every value parses (ConfigError otherwise)
    assert settings.dagster_executor == "k8s"
    assert settings.kafka_bootstrap_servers == env["KAFKA_BOOTSTRAP_SERVERS"]
    # the secret ones come from the Secret, never from values.yaml
    assert not {"CHESSBOARD_DATABASE_URL", "DAGSTER_POSTGRES_URL", "TALENT_API_TOKEN"} & env.keys()
    assert deployment["envSecrets"] == [{"name": "pin-chessboard-env"}]
    assert "postgresqlPassword" not in _values()["postgresql"]

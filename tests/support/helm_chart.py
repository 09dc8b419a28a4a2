"""The official Dagster Helm chart, rendered by Helm itself (its Go SDK through helm_python), with
deploy/helm/values.yaml: what `helm upgrade --install` would apply, without a cluster.

The chart is data kept outside the repository, never copied into it:

1. CHESSBOARD_HELM_CHART, a chart folder;
2. else ../shared/helm/dagster-chart/chart beside the checkout (CI always has it; SOURCE.md there
   names its origins);
3. else the pinned release pulled as Helm users get it: `dagster/dagster` at the Dagster version of
   pyproject.toml from https://dagster-io.github.io/helm (helm_python.registry.pull);
4. else the test is skipped with one line naming what is missing.

The values schema likewise: CHESSBOARD_HELM_SCHEMA, ../shared/helm/dagster-chart/values.schema.json,
or the pulled release's own values.schema.json.
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
SHARED = ROOT.parent / "shared" / "helm" / "dagster-chart"
REPO_URL = "https://dagster-io.github.io/helm"
RELEASE = "pin-chessboard"
NAMESPACE = "pin-chessboard"
INSTANCE = "dagster/templates/configmap-instance.yaml"
WORKSPACE = "dagster/templates/configmap-workspace.yaml"
PIPELINE_ENV = "dagster/templates/configmap-env-pipeline-run.yaml"
USER_DEPLOYMENTS = "dagster/charts/dagster-user-deployments/templates/"


def chart_version() -> str:
    """The Dagster version pinned in pyproject.toml: the chart's version is the Dagster version."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in dependencies if re.fullmatch(r"dagster==[\w.]+", d)]
    return pin.split("==")[1]


@functools.cache
def _pulled() -> Path | str:
    """The release's chart folder, or why it could not be pulled (one line)."""
    import helm_python
    from helm_python import registry

    target = Path(tempfile.mkdtemp(prefix="dagster-chart-"))
    try:
        registry.pull("dagster", repo_url=REPO_URL, version=chart_version(), untar=True, untar_dir=target)
    except helm_python.HelmError as error:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return target / "dagster"


def chart_dir() -> Path:
    """The chart folder (see the module's docstring); pytest.skip with one line when there is none."""
    given = os.environ.get("CHESSBOARD_HELM_CHART")
    if given:
        return Path(given)
    if (SHARED / "chart" / "Chart.yaml").is_file():
        return SHARED / "chart"
    pulled = _pulled()
    if isinstance(pulled, Path):
        return pulled
    pytest.skip(
        f"no Dagster Helm chart: neither {SHARED / 'chart'} nor dagster/dagster {chart_version()} "
        f"from {REPO_URL} ({pulled})"
    )


def schema_path() -> Path:
    """The chart's values.schema.json; pytest.skip with one line when there is none."""
    given = os.environ.get("CHESSBOARD_HELM_SCHEMA")
    if given:
        return Path(given)
    if (SHARED / "values.schema.json").is_file():
        return SHARED / "values.schema.json"
    pulled = _pulled()
    if isinstance(pulled, Path) and (pulled / "values.schema.json").is_file():
        return pulled / "values.schema.json"
    pytest.skip(
        f"no values schema of the Dagster Helm chart: neither {SHARED / 'values.schema.json'} nor "
        f"dagster/dagster {chart_version()} from {REPO_URL} ({pulled})"
    )


def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def render(overrides: Mapping[str, Any] | None = None) -> dict[str, str]:
    """template path -> manifest text, as `helm install pin-chessboard dagster/dagster -n
    pin-chessboard -f deploy/helm/values.yaml` renders them (values.yaml taken as it is unless
    `overrides` replace whole top-level keys)."""
    import helm_python

    chart = helm_python.Chart.load(str(chart_dir()))
    return chart.render({**values(), **(overrides or {})}, name=RELEASE, namespace=NAMESPACE, is_install=True)


def documents(rendered: Mapping[str, str], path: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of one rendered template (empty documents left out)."""
    return [doc for doc in yaml.safe_load_all(rendered[path]) if doc]


def config_map_data(rendered: Mapping[str, str], path: str) -> dict[str, str]:
    (config_map,) = documents(rendered, path)
    assert config_map["kind"] == "ConfigMap"
    return config_map.get("data") or {}


def instance_config(rendered: Mapping[str, str]) -> dict[str, Any]:
    """The rendered instance ConfigMap's dagster.yaml, parsed."""
    return yaml.safe_load(config_map_data(rendered, INSTANCE)["dagster.yaml"])


def workspace_config(rendered: Mapping[str, str]) -> dict[str, Any]:
    return yaml.safe_load(config_map_data(rendered, WORKSPACE)["workspace.yaml"])


def user_deployment(rendered: Mapping[str, str]) -> dict[str, Any]:
    """The one user-code Deployment."""
    (deployment,) = documents(rendered, USER_DEPLOYMENTS + "deployment-user.yaml")
    assert deployment["kind"] == "Deployment"
    return deployment


def user_container(rendered: Mapping[str, str]) -> dict[str, Any]:
    (container,) = user_deployment(rendered)["spec"]["template"]["spec"]["containers"]
    return container


def config_maps_by_name(rendered: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Every rendered ConfigMap's data by its name (what an envFrom configMapRef reads)."""
    found = {}
    for path in rendered:
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in documents(rendered, path):
            if doc.get("kind") == "ConfigMap":
                found[doc["metadata"]["name"]] = {k: str(v) for k, v in (doc.get("data") or {}).items()}
    return found


def container_env(
    rendered: Mapping[str, str], container: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]]
) -> dict[str, str]:
    """The environment Kubernetes gives `container`: its envFrom (ConfigMaps of the render, the
    Secrets given here by name; optional ones may be missing), then its env (values, and
    secretKeyRef from `secrets`), later entries winning as in Kubernetes."""
    config_maps = config_maps_by_name(rendered)
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        if "configMapRef" in source:
            env.update(config_maps[source["configMapRef"]["name"]])
        else:
            ref = source["secretRef"]
            if ref["name"] in secrets:
                env.update(secrets[ref["name"]])
            else:
                assert ref.get("optional"), f"the Secret {ref['name']} is not given"
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets[ref["name"]][ref["key"]]
    return env

"""deploy/helm/metrics-exporter.yaml: the exporter runs `pin-chessboard metrics serve` on the image
and Secret of the user-code deployment, listens on all interfaces and is found by Prometheus."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "deploy" / "helm" / "metrics-exporter.yaml"


def test_the_exporter_serves_the_projects_metrics_from_the_deployments_image_and_secret():
    deployment, service = yaml.safe_load_all(MANIFEST.read_text())
    (deployment_values,) = yaml.safe_load((ROOT / "deploy" / "helm" / "values.yaml").read_text())[
        "dagster-user-deployments"
    ]["deployments"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    image = deployment_values["image"]
    assert container["image"] == f"{image['repository']}:{image['tag']}"
    assert container["envFrom"] == [
        {"secretRef": {"name": s["name"]}} for s in deployment_values["envSecrets"]
    ]
    command = container["command"]
    assert command[:3] == ["pin-chessboard", "metrics", "serve"]
    port = int(command[command.index("--port") + 1])
    assert command[command.index("--host") + 1] == "0.0.0.0"
    assert container["ports"] == [{"name": "metrics", "containerPort": port}]
    assert deployment["spec"]["replicas"] == 1
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    annotations = service["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(port)

"""CHESSBOARD_DAGSTER_EXECUTOR=k8s without a cluster: the definitions validate, the jobs' executor
config takes the recommended run config, and the Kubernetes Job that dagster-k8s would create for
a step (captured at the API client, tests/k8s/k8s_probe.py) runs the step on the code location's
image with the project's environment and Secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.k8s.k8s_probe import IMPORT_JOB, LOCATION_IMAGE, RECALC_JOB, RELEASE_NAMESPACE

# one worker runs the module (its fixtures start once): --dist loadgroup
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("test_k8s_executor"),
]  # two fresh interpreters load the definitions

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
RUN_CONFIG = ROOT / "deploy" / "helm" / "k8s-executor-run-config.yaml"
# a cluster nobody listens for: nothing may reach it
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
  - name: nowhere
    cluster: {server: "https://127.0.0.1:9"}
contexts:
  - name: nowhere
    context: {cluster: nowhere, user: nobody, namespace: pin-chessboard}
current-context: nowhere
users:
  - name: nobody
    user: {token: unused}
"""


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DAGSTER_HOME": str(tmp),  # an empty instance folder: Dagster's defaults, not ../dagster.yaml
        "CHESSBOARD_DATABASE_URL": "postgresql://validate@127.0.0.1:9/chessboard",
        **extra,
    }


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("k8s-probe")
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    home = tmp / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tests.k8s.k8s_probe", str(VALUES), str(RUN_CONFIG), str(kubeconfig)],
        cwd=ROOT,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_definitions_validate_with_the_k8s_executor(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dagster",
            "definitions",
            "validate",
            "-m",
            "pin_chessboard_pipelines.definitions",
        ],
        cwd=ROOT,
        env=_env(tmp_path, CHESSBOARD_DAGSTER_EXECUTOR="k8s"),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "Validation successful for code location pin_chessboard_pipelines.definitions"
        in done.stdout + done.stderr
    )


def test_the_import_and_recalc_jobs_take_the_recommended_k8s_run_config(probe):
    for job_name in (IMPORT_JOB, RECALC_JOB):
        assert probe["run_config"][job_name]["executor"] == "k8s"
        assert probe["run_config"][job_name]["recommended"] == "valid"


def test_a_wrong_k8s_run_config_is_refused_by_the_executor_schema(probe):
    for job_name in (IMPORT_JOB, RECALC_JOB):
        message = probe["run_config"][job_name]["wrong"]
        assert "root:execution:config:max_concurrent" in message and '"many"' in message


def test_the_step_job_runs_the_step_on_the_code_location_image(probe):
    step = probe["step_job"]
    (container,) = step["body"]["spec"]["template"]["spec"]["containers"]
    assert step["namespace"] == RELEASE_NAMESPACE
    assert step["events"] == ["STEP_WORKER_STARTING"]
    assert container["image"] == LOCATION_IMAGE
    assert container["args"] == ["dagster", "api", "execute_step"]  # the step's arguments: in the env
    labels = step["body"]["metadata"]["labels"]
    assert labels["dagster/job"] == RECALC_JOB and labels["dagster/op"] == step["step_key"]
    assert labels["dagster/run-id"] == step["run_id"]
    assert step["body"]["spec"]["backoffLimit"] == 0  # a failed step is Dagster's to retry, not the Job's


def test_the_step_job_carries_the_environment_secret_and_resources(probe):
    values = yaml.safe_load(VALUES.read_text())
    run_config = yaml.safe_load(RUN_CONFIG.read_text())
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    pod = probe["step_job"]["body"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["DAGSTER_RUN_JOB_NAME"] == RECALC_JOB
    assert env["DAGSTER_RUN_STEP_KEY"] == probe["step_job"]["step_key"]
    assert env["DAGSTER_COMPRESSED_EXECUTE_STEP_ARGS"]
    assert env["CHESSBOARD_DAGSTER_EXECUTOR"] == "k8s"
    assert {item["name"]: item["value"] for item in deployment["env"]}.items() <= env.items()
    # the Secret with CHESSBOARD_DATABASE_URL, DAGSTER_POSTGRES_URL and TALENT_API_TOKEN, by reference
    assert container["envFrom"] == [{"secretRef": {"name": "pin-chessboard-env"}}]
    assert not {"CHESSBOARD_DATABASE_URL", "TALENT_API_TOKEN", "DAGSTER_POSTGRES_URL"} & env.keys()
    password = next(item for item in container["env"] if item["name"] == "DAGSTER_PG_PASSWORD")
    assert password["valueFrom"]["secretKeyRef"]["name"] == values["global"]["postgresqlSecretName"]
    step_config = run_config["execution"]["config"]["step_k8s_config"]
    assert container["resources"] == step_config["container_config"]["resources"]
    assert pod["restartPolicy"] == "Never"

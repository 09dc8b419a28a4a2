"""The Dockerfile builds (podman) and its image serves the definitions: `dagster definitions validate`
with the k8s executor, the code server answering its health check, a non-root user, no secret in
the image's environment.

The base image is python:3.11-slim-bookworm when it can be pulled; else CHESSBOARD_IMAGE_BASE; else a
Debian bookworm with python3.11 made by debootstrap from deb.debian.org (as root). The host's CA
bundle is mounted into the build for pip (builds behind a TLS-inspecting proxy). Skipped, with the
reason, where podman is missing or cannot run a container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/pin-chessboard-pipelines:test"
PULLABLE_BASE = "docker.io/library/python:3.11-slim-bookworm"
DEBOOTSTRAP_BASE = "localhost/pin-chessboard-base:bookworm"
HOST_CA_BUNDLE = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
SECRET_NAMES = ("CHESSBOARD_DATABASE_URL", "DAGSTER_POSTGRES_URL", "TALENT_API_TOKEN", "DAGSTER_PG_PASSWORD")

pytestmark = [
    pytest.mark.slow,
    # a first build downloads and installs every dependency (minutes); later ones reuse its layers
    pytest.mark.timeout(1800),
]


def _podman(*args: str, timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, check=check)


def _last_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def _base_image(tmp_path: Path) -> str:
    given = os.environ.get("CHESSBOARD_IMAGE_BASE")
    if given:
        return given
    for image in (PULLABLE_BASE, DEBOOTSTRAP_BASE):
        if _podman("image", "exists", image).returncode == 0:
            return image
    pulled = _podman("pull", "--quiet", PULLABLE_BASE, timeout=600)
    if pulled.returncode == 0:
        return PULLABLE_BASE
    if shutil.which("debootstrap") is None or os.geteuid() != 0:
        pytest.skip(
            f"no base image: {PULLABLE_BASE} cannot be pulled ({_last_line(pulled)}) and debootstrap as root is not available"
        )
    rootfs = tmp_path / "rootfs"
    try:
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-venv,ca-certificates",
                "bookworm",
                str(rootfs),
                "http://deb.debian.org/debian",
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=True,
        )
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["podman", "import", "-", DEBOOTSTRAP_BASE],
            stdin=tar.stdout,
            capture_output=True,
            timeout=600,
            check=True,
        )
        tar.wait(timeout=60)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"no base image: debootstrap/podman import failed: {(error.stderr or '')[-500:]}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return DEBOOTSTRAP_BASE


def _run_flags(base: str) -> tuple[list[str], list[str]]:
    """(global, run/build) podman flags with which a container runs here: none, or runc with the
    process limits of this process (a container without CAP_SYS_RESOURCE cannot raise them, and
    crun refuses hybrid cgroups). Skips with podman's error when neither works."""
    import resource

    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 8192)
    candidates = [
        ([], []),
        (
            ["--runtime", "runc"],
            ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"],
        ),
    ]
    errors = []
    for global_flags, flags in candidates:
        done = _podman(*global_flags, "run", "--rm", "--network", "none", *flags, base, "true")
        if done.returncode == 0:
            return global_flags, flags
        errors.append(_last_line(done))
    pytest.skip(f"podman cannot run a container here: {' / '.join(errors)}")


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[list[str], list[str]]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (Debian: apt-get install podman)")
    base = _base_image(tmp_path_factory.mktemp("image-base"))
    global_flags, flags = _run_flags(base)
    ca = (
        ["-v", f"{HOST_CA_BUNDLE}:/run/build-ca.crt:ro", "--build-arg", "BUILD_CA_BUNDLE=/run/build-ca.crt"]
        if HOST_CA_BUNDLE.is_file()
        else []
    )
    built = _podman(
        *global_flags,
        "build",
        *flags,
        *ca,
        "--build-arg",
        f"BASE_IMAGE={base}",
        "-t",
        IMAGE,
        str(ROOT),
        timeout=1500,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return global_flags, flags


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


def test_the_image_entry_point_is_the_code_server(image):
    global_flags, flags = image
    started = _podman(
        *global_flags,
        "run",
        "--detach",
        "--network",
        "none",
        *flags,
        "-e",
        "CHESSBOARD_DAGSTER_EXECUTOR=k8s",
        IMAGE,
        check=True,
    )
    container = started.stdout.strip()
    try:
        deadline = time.monotonic() + 300  # the server loads the definitions first (slow on a busy machine)
        while True:
            health = _podman(
                *global_flags, "exec", container, "dagster", "api", "grpc-health-check", "-p", "3030"
            )
            if health.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        logs = _podman("logs", container)
        assert health.returncode == 0, (health.stdout + logs.stdout + logs.stderr)[-3000:]
        assert "gRPC connection successful" in health.stdout + health.stderr
    finally:
        _podman(*global_flags, "rm", "--force", "--time", "0", container)

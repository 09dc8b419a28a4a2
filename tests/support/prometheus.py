"""Debian's Prometheus for the tests: `promtool` and a real `prometheus` scraping `metrics serve`.

Both come from the `prometheus` package; when missing they are installed with apt-get (CI runs
as root on a clean Debian), and only when that is impossible are the tests skipped, loudly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pin_chessboard_pipelines.runtime.embedded import free_port


def prometheus_binary(name: str) -> str:
    """Path of `promtool` or `prometheus`, installing Debian's package when missing."""
    found = shutil.which(name)
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        pytest.skip(
            f"PROMETHEUS NOT AVAILABLE: {name} is missing and apt-get cannot install it (not root / no apt)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "RUNLEVEL": "1"}
    for command in ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", "prometheus"]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.skip(
                f"PROMETHEUS NOT AVAILABLE: `{' '.join(command)}` failed: {done.stderr.strip()[-300:]}"
            )
    found = shutil.which(name)
    if not found:
        pytest.skip(f"PROMETHEUS NOT AVAILABLE: the prometheus package has no {name}")
    return found


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def api(self, path: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Instant vector -> {sorted labels without __name__/instance/job: value}."""
        data = self.api("query", query=promql)
        out = {}
        for item in data["result"]:
            labels = tuple(sorted((k, v) for k, v in item["metric"].items() if k not in ("instance", "job")))
            out[labels] = float(item["value"][1])
        return out

    def value(self, promql: str) -> float | None:
        """The single value of a query (None when it returns nothing)."""
        result = self.query(promql)
        assert len(result) <= 1, result
        return next(iter(result.values()), None)


@contextmanager
def prometheus_scraping(target: str, rule_files: list[Path] | None = None) -> Iterator[Prometheus]:
    """A Prometheus (1 s scrape and evaluation) scraping http://<target>/metrics."""
    binary = prometheus_binary("prometheus")
    folder = Path(tempfile.mkdtemp(prefix="prometheus-"))
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(p) for p in rule_files or []],
        "scrape_configs": [{"job_name": "pin-chessboard", "static_configs": [{"targets": [target]}]}],
    }
    (folder / "prometheus.yml").write_text(json.dumps(config))
    port = free_port()
    log = (folder / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={folder / 'prometheus.yml'}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    prometheus = Prometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"prometheus did not start: {(folder / 'prometheus.log').read_text()[-2000:]}"
                )
            time.sleep(0.1)  # polling readiness with a deadline
        yield prometheus
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def metrics_serve(env: dict[str, str], cwd: Path) -> Iterator[str]:
    """`pin-chessboard metrics serve` on a free port with `env`; yields its host:port once it listens."""
    import sys

    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", "metrics", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    try:
        assert serve.stdout is not None and serve.stdout.readline().startswith("metrics on ")
        yield f"127.0.0.1:{port}"
    finally:
        serve.terminate()
        serve.wait(timeout=30)
        if serve.stdout is not None:
            serve.stdout.close()

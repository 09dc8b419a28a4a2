"""The standard deployment under test: `dagster-webserver -w workspace.yaml` and `dagster-daemon run
-w workspace.yaml` as subprocesses, DAGSTER_HOME holding the project's dagster.yaml (with the shorter
daemon intervals of TEST_INSTANCE), run storage and
the chessboard store in fresh databases of the test PostgreSQL, the test broker and a Talent simulator,
plus a small GraphQL client for the webserver.

    def test_something(dagster_stack):
        run_id = dagster_stack.graphql.launch_job("outbox_relay")
        run = dagster_stack.graphql.wait_for_run(run_id)
        assert run["status"] == "SUCCESS"

The `dagster_stack` fixture (tests/e2e/conftest.py) lives as long as the e2e package: its chessboard
database is shared by every test that uses it, so a test creates rows of its own and does not expect
empty tables. `stack_with_simulator(...)` and `start_dagster_stack(...)` start another one (other
dataset, other environment) as a context manager. The URLs are given in their bare `postgresql://` form,
as an operator would write them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from pin_chessboard_pipelines.runtime.embedded import admin_execute, free_port
from pin_chessboard_pipelines.store.engine import get_engine, libpq_url, with_database
from tests.support.command_env import clean_environ

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCATION = "pin_chessboard_pipelines"
REPOSITORY = "__repository__"
READY_DAEMONS = ("SENSOR", "SCHEDULER", "QUEUED_RUN_COORDINATOR", "MONITORING")
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
# Short recalc drain lifetimes so that tests see several runs; any variable can be overridden.
TEST_ENV = {
    "CHESSBOARD_RECALC_DRAIN_LIFETIME_SECONDS": "120",
    "CHESSBOARD_RECALC_DRAIN_LEAD_SECONDS": "45",
    "CHESSBOARD_RECALC_DRAIN_POLL_SECONDS": "0.5",
}
# The test instance: the project's dagster.yaml with shorter daemon intervals, where Dagster takes them
# from the instance. The QueuedRunCoordinator daemon looks at the queue every dequeue_interval_seconds
# (5 by default): a launched run waits for it. The monitoring daemon looks for dead run workers
# every poll_interval_seconds (30 here): a SIGKILLed run is failed that much later. The sensor
# (5 s), backfill (30 s) and scheduler (each minute) loops are fixed in Dagster's code.
TEST_INSTANCE = {
    "run_coordinator": {"config": {"dequeue_interval_seconds": 1}},
    "run_monitoring": {"poll_interval_seconds": 3},
}
# The xdist group of the modules that use the e2e package's `dagster_stack`: one worker runs them
# all (`make test`: --dist loadgroup), so the stack starts once
SHARED_STACK_GROUP = "e2e_dagster_stack"
_counter = itertools.count()


def instance_yaml() -> str:
    """The project's dagster.yaml with TEST_INSTANCE merged in (maps merged, values replaced)."""
    import yaml

    def merged(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(base)
        for key, value in override.items():
            out[key] = merged(out.get(key) or {}, value) if isinstance(value, Mapping) else value
        return out

    return yaml.safe_dump(merged(yaml.safe_load((ROOT / "dagster.yaml").read_text()), TEST_INSTANCE))


class GraphQLError(AssertionError):
    pass


_RUN_FIELDS = """
fragment RunFields on Run { runId jobName status creationTime startTime endTime allPools tags { key value } }"""


class DagsterGraphQL:
    """The webserver's /graphql endpoint (dagster-graphql's schema), a few calls tests need."""

    def __init__(self, base_url: str, timeout: float = 90.0, location: str = LOCATION) -> None:
        self.url = f"{base_url}/graphql"
        self.timeout = timeout
        self.location = location  # the code location's name in the workspace
        self.session = requests.Session()

    def query(self, query: str, variables: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """`data` of the answer; GraphQLError on transport or schema errors."""
        response = self.session.post(
            self.url, json={"query": query, "variables": dict(variables or {})}, timeout=self.timeout
        )
        if response.status_code != 200:
            raise GraphQLError(f"HTTP {response.status_code}: {response.text[:2000]}")
        body = response.json()
        if body.get("errors"):
            raise GraphQLError(str(body["errors"])[:2000])
        return body["data"]

    # -- runs ---------------------------------------------------------------------------------------

    def launch_job(
        self,
        job_name: str,
        run_config: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        asset_keys: list[str] | None = None,
    ) -> str:
        """launchRun of a job (`__ASSET_JOB` with asset_keys for assets); returns the run id."""
        selector: dict[str, Any] = {
            "repositoryLocationName": self.location,
            "repositoryName": REPOSITORY,
            "jobName": job_name,
        }
        if asset_keys is not None:
            selector["assetSelection"] = [{"path": [key]} for key in asset_keys]
        data = self.query(
            """
            mutation Launch($params: ExecutionParams!) {
              launchRun(executionParams: $params) {
                __typename
                ... on LaunchRunSuccess { run { runId } }
                ... on PythonError { message stack }
                ... on RunConfigValidationInvalid { errors { message } }
                ... on Error { message }
              }
            }""",
            {
                "params": {
                    "selector": selector,
                    "runConfigData": dict(run_config or {}),
                    "executionMetadata": {"tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]},
                }
            },
        )
        result = data["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise GraphQLError(f"launchRun {job_name}: {result}")
        return result["run"]["runId"]

    def launch_backfill(self, params: Mapping[str, Any]) -> str:
        """launchPartitionBackfill (LaunchBackfillParams, as the UI's Launch backfill sends them);
        returns the backfill id."""
        data = self.query(
            """
            mutation Backfill($params: LaunchBackfillParams!) {
              launchPartitionBackfill(backfillParams: $params) {
                __typename ... on LaunchBackfillSuccess { backfillId } ... on Error { message }
              }
            }""",
            {"params": dict(params)},
        )
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise GraphQLError(f"launchPartitionBackfill: {result}")
        return result["backfillId"]

    def runs(
        self,
        job_name: str | None = None,
        tags: Mapping[str, str] | None = None,
        statuses: list[str] | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        """Newest first: runId, jobName, status, tags {key: value}, creationTime/startTime/endTime,
        allPools (the pools the run holds from dequeue to end, None for none)."""
        run_filter: dict[str, Any] = {}
        if job_name:
            run_filter["pipelineName"] = job_name
        if tags:
            run_filter["tags"] = [{"key": k, "value": v} for k, v in tags.items()]
        if statuses:
            run_filter["statuses"] = statuses
        data = self.query(
            """
            query Runs($filter: RunsFilter, $limit: Int) {
              runsOrError(filter: $filter, limit: $limit) {
                __typename
                ... on Runs { results { ...RunFields } }
                ... on Error { message }
              }
            }"""
            + _RUN_FIELDS,
            {"filter": run_filter, "limit": limit},
        )
        result = data["runsOrError"]
        if result["__typename"] != "Runs":
            raise GraphQLError(str(result))
        return [_with_tag_dict(run) for run in result["results"]]

    def run(self, run_id: str) -> dict[str, Any] | None:
        runs = self._runs_by_id([run_id])
        return runs[0] if runs else None

    def _runs_by_id(self, run_ids: list[str]) -> list[dict[str, Any]]:
        data = self.query(
            """
            query Runs($filter: RunsFilter) {
              runsOrError(filter: $filter) {
                ... on Runs { results { ...RunFields } }
              }
            }"""
            + _RUN_FIELDS,
            {"filter": {"runIds": run_ids}},
        )
        return [_with_tag_dict(run) for run in data["runsOrError"].get("results", [])]

    def wait_for_run(self, run_id: str, statuses: tuple[str, ...] = FINISHED, timeout: float = 120) -> dict:
        """Polls the run until its status is one of `statuses`; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run and run["status"] in statuses:
                return run
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"run {run_id} is {run and run['status']} after {timeout:.0f}s; {self._in_progress()}"
                )
            time.sleep(0.2)

    def _in_progress(self) -> str:
        """The runs not finished, newest first: what a run that waits may be waiting for."""
        runs = self.runs(statuses=["QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING"], limit=20)
        now = time.time()
        return "runs in progress: " + (
            ", ".join(
                f"{r['jobName']} {r['runId'][:8]} {r['status']} for {now - r['creationTime']:.0f}s"
                f" {_launched_by(r['tags'])}"
                for r in runs
            )
            or "none"
        )

    def terminate_run(self, run_id: str) -> None:
        data = self.query(
            """
            mutation Terminate($runId: String!) {
              terminateRun(runId: $runId) { __typename ... on Error { message } }
            }""",
            {"runId": run_id},
        )
        if data["terminateRun"]["__typename"] != "TerminateRunSuccess":
            raise GraphQLError(str(data["terminateRun"]))

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event of the run's log, oldest first: __typename, message, level, stepKey, timestamp."""
        events: list[dict[str, Any]] = []
        cursor = None
        while True:
            data = self.query(
                """
                query Logs($runId: ID!, $cursor: String) {
                  logsForRun(runId: $runId, afterCursor: $cursor) {
                    __typename
                    ... on EventConnection {
                      cursor hasMore
                      events { __typename
                        ... on MessageEvent { message level stepKey timestamp }
                      }
                    }
                    ... on Error { message }
                  }
                }""",
                {"runId": run_id, "cursor": cursor},
            )
            result = data["logsForRun"]
            if result["__typename"] != "EventConnection":
                raise GraphQLError(str(result))
            events.extend(result["events"])
            cursor = result["cursor"]
            if not result["hasMore"]:
                return events

    def run_messages(self, run_id: str) -> list[str]:
        return [event["message"] for event in self.run_events(run_id) if event.get("message")]

    # -- sensors and schedules ----------------------------------------------------------------------

    def _instigator_selector(self, name: str, kind: str) -> dict[str, str]:
        return {
            "repositoryLocationName": self.location,
            "repositoryName": REPOSITORY,
            f"{kind}Name": name,
        }

    def sensor(self, name: str, tick_limit: int = 20) -> dict[str, Any]:
        """status, cursor and the latest ticks (status, timestamp, runIds, skipReason, cursor, error)."""
        data = self.query(
            """
            query Sensor($selector: SensorSelector!, $limit: Int) {
              sensorOrError(sensorSelector: $selector) {
                __typename
                ... on Sensor {
                  name minIntervalSeconds
                  sensorState { status typeSpecificData { ... on SensorData { lastCursor } }
                    ticks(limit: $limit) { status timestamp runIds skipReason cursor
                                           error { message } } }
                }
                ... on Error { message }
              }
            }""",
            {"selector": self._instigator_selector(name, "sensor"), "limit": tick_limit},
        )
        result = data["sensorOrError"]
        if result["__typename"] != "Sensor":
            raise GraphQLError(str(result))
        return result

    def sensor_ticks(self, name: str, limit: int = 20) -> list[dict[str, Any]]:
        return self.sensor(name, limit)["sensorState"]["ticks"]

    def schedule(self, name: str, tick_limit: int = 20) -> dict[str, Any]:
        data = self.query(
            """
            query Schedule($selector: ScheduleSelector!, $limit: Int) {
              scheduleOrError(scheduleSelector: $selector) {
                __typename
                ... on Schedule { name cronSchedule executionTimezone pipelineName
                  scheduleState { status ticks(limit: $limit) { status timestamp runIds skipReason } } }
                ... on Error { message }
              }
            }""",
            {"selector": self._instigator_selector(name, "schedule"), "limit": tick_limit},
        )
        result = data["scheduleOrError"]
        if result["__typename"] != "Schedule":
            raise GraphQLError(str(result))
        return result

    # -- readiness ----------------------------------------------------------------------------------

    def location_loaded(self) -> bool:
        data = self.query(
            """
            { workspaceOrError { __typename ... on Workspace { locationEntries {
                name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"""
        )
        entries = data["workspaceOrError"].get("locationEntries", [])
        for entry in entries:
            if entry["name"] == self.location and entry["loadStatus"] == "LOADED":
                loaded = entry["locationOrLoadError"] or {}
                if loaded.get("__typename") == "PythonError":
                    raise GraphQLError(f"code location failed to load: {loaded['message']}")
                return loaded.get("__typename") == "RepositoryLocation"
        return False

    def healthy_daemons(self) -> set[str]:
        data = self.query(
            "{ instance { daemonHealth { allDaemonStatuses { daemonType healthy required } } } }"
        )
        statuses = data["instance"]["daemonHealth"]["allDaemonStatuses"]
        return {s["daemonType"] for s in statuses if s["healthy"]}


def _with_tag_dict(run: dict[str, Any]) -> dict[str, Any]:
    return {**run, "tags": {t["key"]: t["value"] for t in run["tags"]}}


@dataclass
class DagsterStack:
    """A running webserver + daemon; `env` is the environment both were started with."""

    home: Path
    env: dict[str, str]
    webserver_url: str
    chessboard_url: str  # CHESSBOARD_DATABASE_URL
    dagster_url: str  # DAGSTER_POSTGRES_URL
    logs: Path
    graphql: DagsterGraphQL
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def engine(self):
        """SQLAlchemy engine on the stack's chessboard database."""
        return get_engine(self.chessboard_url)

    @contextlib.contextmanager
    def instance(self) -> Iterator[Any]:
        """The stack's DagsterInstance in the test process (the environment is set only while it is built)."""
        import dagster as dg

        with _patched_env({"DAGSTER_HOME": str(self.home), "DAGSTER_POSTGRES_URL": self.dagster_url}):
            instance = dg.DagsterInstance.from_config(str(self.home))
        with instance:
            yield instance

    def dagster_sql(self, statement: str) -> list[tuple]:
        """Runs SQL on the stack's Dagster storage database (e.g. to age runs)."""
        return admin_execute(self.dagster_url, statement)

    def cli(self, *args: str, timeout: float = 120, env: Mapping[str, str] | None = None):
        """`pin-chessboard …` with the stack's environment; returns the CompletedProcess."""
        return subprocess.run(
            [str(BIN / "pin-chessboard"), *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.home,
        )

    def log_tail(self, chars: int = 4000) -> str:
        parts = []
        for name in self.processes:
            path = self.logs / f"{name}.log"
            if path.exists():
                parts.append(f"--- {name}.log\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}\n{self.log_tail()}")


def _launched_by(tags: Mapping[str, str]) -> str:
    """What launched a run, as its tags say: a backfill, a sensor, a schedule, a re-execution."""
    keys = ("dagster/backfill", "dagster/sensor_name", "dagster/schedule_name", "dagster/parent_run_id")
    return "{" + ", ".join(f"{key.split('/')[1]}={tags[key][:12]}" for key in keys if key in tags) + "}"


@contextlib.contextmanager
def _patched_env(values: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _clean_environment() -> dict[str, str]:
    """The test process's environment without the project's and Dagster's own variables."""
    return clean_environ("KAFKA_", "PIN_CHESSBOARD_")


def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM to the process group (code servers and run workers included), SIGKILL after `timeout`."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    # whatever the leader left behind in its group goes too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


@contextlib.contextmanager
def start_dagster_stack(
    pg_server_url: str,
    template_db: str,
    *,
    kafka_bootstrap: str,
    talent_api_url: str,
    env: Mapping[str, str] | None = None,
    ready_timeout: float = 180,
) -> Iterator[DagsterStack]:
    """Starts webserver + daemon on fresh databases; stops both process groups and drops the databases."""
    n = next(_counter)
    tag = f"{os.getpid()}_{n}"
    chessboard_db, dagster_db = f"stack_chessboard_{tag}", f"stack_dagster_{tag}"
    admin_execute(pg_server_url, f'CREATE DATABASE "{chessboard_db}" TEMPLATE "{template_db}"')
    admin_execute(pg_server_url, f'CREATE DATABASE "{dagster_db}"')
    # bare postgresql:// URLs, as an operator writes them
    chessboard_url = libpq_url(with_database(pg_server_url, chessboard_db))
    dagster_url = libpq_url(with_database(pg_server_url, dagster_db))
    base = Path(tempfile.mkdtemp(prefix="dagster-stack-"))
    home, logs, state = base / "dagster_home", base / "logs", base / "state"
    for folder in (home, logs, state):
        folder.mkdir(parents=True)
    (home / "dagster.yaml").write_text(instance_yaml())
    port = free_port()
    stack_env = {
        **_clean_environment(),
        "DAGSTER_HOME": str(home),
        "DAGSTER_POSTGRES_URL": dagster_url,
        "CHESSBOARD_DATABASE_URL": chessboard_url,
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "TALENT_API_URL": talent_api_url,
        "PIN_CHESSBOARD_STATE_DIR": str(state),
        "PYTHONUNBUFFERED": "1",
        **TEST_ENV,
        **(env or {}),
    }
    stack = DagsterStack(
        home=home,
        env=stack_env,
        webserver_url=f"http://127.0.0.1:{port}",
        chessboard_url=chessboard_url,
        dagster_url=dagster_url,
        logs=logs,
        graphql=DagsterGraphQL(f"http://127.0.0.1:{port}"),
    )
    workspace = str(ROOT / "workspace.yaml")
    commands = {
        "webserver": [str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1", "-p", str(port)],
        "daemon": [str(BIN / "dagster-daemon"), "run", "-w", workspace],
    }
    try:
        with running_stack(
            stack, {name: (command, stack_env) for name, command in commands.items()}, ready_timeout
        ):
            yield stack
    finally:
        get_engine(chessboard_url).dispose()
        for db in (chessboard_db, dagster_db):
            admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def running_stack(
    stack: DagsterStack,
    commands: Mapping[str, tuple[list[str], Mapping[str, str]]],
    ready_timeout: float = 180,
) -> Iterator[DagsterStack]:
    """Starts `commands` (name -> argv and environment; a webserver at stack.webserver_url and a
    daemon among them), each in a process group of its own with its output in stack.logs/<name>.log,
    in the given order, and waits until the code location is loaded and the daemon's loops are
    healthy; stops every group at the end. A process named `code-server` is waited for first:
    `dagster api grpc-health-check` answers on the port of its `-p`."""
    try:
        for name, (command, env) in commands.items():
            stack.processes[name] = subprocess.Popen(
                command,
                cwd=stack.home,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=(stack.logs / f"{name}.log").open("ab"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            if name == "code-server":
                _wait_code_server(stack, command[command.index("-p") + 1], ready_timeout)
        _wait_ready(stack, ready_timeout)
        yield stack
    finally:
        for proc in reversed(stack.processes.values()):  # the code server last: the daemon calls it
            _stop(proc)


def _wait_code_server(stack: DagsterStack, port: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        stack.check_alive()
        health = subprocess.run(
            [str(BIN / "dagster"), "api", "grpc-health-check", "-p", port],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if health.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the code server does not answer on port {port} after {timeout:.0f}s: "
                f"{health.stdout + health.stderr}\n{stack.log_tail()}"
            )
        time.sleep(1)


def _wait_ready(stack: DagsterStack, timeout: float) -> None:
    """The code location is loaded in the webserver and the daemon's loops report healthy."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        stack.check_alive()
        try:
            if stack.graphql.location_loaded() and set(READY_DAEMONS) <= stack.graphql.healthy_daemons():
                return
        except (requests.RequestException, GraphQLError) as error:
            last_error = error
        time.sleep(0.5)
    raise AssertionError(
        f"the Dagster stack is not ready after {timeout:.0f}s ({last_error})\n{stack.log_tail()}"
    )


@contextlib.contextmanager
def stack_with_simulator(
    pg_server_url: str,
    pg_template_url: str,
    kafka_bootstrap: str,
    spec: Any,
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[DagsterStack, Any]]:
    """webserver + daemon whose Talent API is a simulator serving the dataset `spec`; the simulator
    stops after the stack."""
    from pin_chessboard_pipelines.talent.simulator.server import SimulatorServer

    simulator = SimulatorServer(spec).start()
    try:
        with start_dagster_stack(
            pg_server_url,
            urlsplit(pg_template_url).path.lstrip("/"),
            kafka_bootstrap=kafka_bootstrap,
            talent_api_url=simulator.url,
            env=env,
        ) as stack:
            yield stack, simulator
    finally:
        simulator.stop()

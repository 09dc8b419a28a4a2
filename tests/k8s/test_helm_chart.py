"""What the official Dagster Helm chart renders from deploy/helm/values.yaml (Helm's Go SDK through
helm_python, tests/support/helm_chart.py), run here without a cluster:

- the rendered instance (the instance ConfigMap's dagster.yaml) opens and migrates Dagster's storage
  on the test PostgreSQL and records a run;
- every setting of the project's dagster.yaml is in it, or named in docs/deployment.md with the
  reason it is not;
- run pods and step pods get the user-code Deployment's environment;
- a dagster-webserver and a dagster-daemon on the rendered instance and workspace, and a code server
  started as the rendered Deployment starts it, complete an import launched over GraphQL.

What a cluster provides is replaced, each replacement named here and nothing else changed:
K8sRunLauncher (Jobs need a cluster) by the DefaultRunLauncher, and with it run monitoring's
resume (K8sRunLauncher's alone) off (run workers started by the code
server, with the code server's environment: the same as the run pods', see
test_run_and_step_pods_get_the_environment_of_the_code_server); the PostgreSQL Service's host and
port by the test server's; the cluster addresses of values.yaml's env (Kafka, Talent) by the test
broker and a Talent simulator; the k8s executor (step Jobs) by the in-process one; the paths and
ports of the pods (DAGSTER_HOME, the workspace mount, 0.0.0.0:80/3030) by a temporary folder,
127.0.0.1 and free ports.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
import yaml

from pin_chessboard_pipelines.runtime.embedded import admin_execute, free_port
from pin_chessboard_pipelines.store.engine import libpq_url, with_database
from tests.support import helm_chart
from tests.support.dagster_stack import (
    BIN,
    DagsterGraphQL,
    DagsterStack,
    _clean_environment,
    _patched_env,
    running_stack,
)
from tests.support.polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "deployment.md"
# one worker runs the module (--dist loadgroup): its render, its role and database `dagster`
pytestmark = pytest.mark.xdist_group("test_helm_chart")

STORAGES = ("run_storage", "event_log_storage", "schedule_storage")
# the one instance setting swapped: K8sRunLauncher needs a cluster
LOCAL_LAUNCHER = {"module": "dagster.core.launcher", "class": "DefaultRunLauncher"}
PG_PASSWORD = "helm-chart-test"
TALENT_TOKEN = "helm-chart-test-token"
USER_SECRET = "pin-chessboard-env"
PG_SECRET = "pin-chessboard-dagster-postgresql"

# dagster.yaml setting -> where the rendered dagster.yaml has it (the same value expected there)
RENDERED_PATH = {
    "run_coordinator.module": "run_coordinator.module",
    "run_coordinator.class": "run_coordinator.class",
    "concurrency.runs.max_concurrent_runs": "concurrency.runs.max_concurrent_runs",
    "concurrency.runs.tag_concurrency_limits": "concurrency.runs.tag_concurrency_limits",
    "concurrency.pools.granularity": "concurrency.pools.granularity",
    "concurrency.pools.default_limit": "concurrency.pools.default_limit",
    "python_logs.python_log_level": "python_logs.python_log_level",
    "python_logs.managed_python_loggers": "python_logs.managed_python_loggers",
    "run_monitoring.enabled": "run_monitoring.enabled",
    "run_monitoring.start_timeout_seconds": "run_monitoring.start_timeout_seconds",
    "run_monitoring.cancel_timeout_seconds": "run_monitoring.cancel_timeout_seconds",
    "run_monitoring.poll_interval_seconds": "run_monitoring.poll_interval_seconds",
    "run_retries.enabled": "run_retries.enabled",
    "run_retries.max_retries": "run_retries.max_retries",
    "run_retries.retry_on_asset_or_op_failure": "run_retries.retry_on_asset_or_op_failure",
    "retention.sensor.purge_after_days.skipped": "retention.sensor.purge_after_days.skipped",
    "retention.sensor.purge_after_days.failure": "retention.sensor.purge_after_days.failure",
    "retention.sensor.purge_after_days.success": "retention.sensor.purge_after_days.success",
    "retention.schedule.purge_after_days.skipped": "retention.schedule.purge_after_days.skipped",
    "retention.schedule.purge_after_days.failure": "retention.schedule.purge_after_days.failure",
    "retention.schedule.purge_after_days.success": "retention.schedule.purge_after_days.success",
    "sensors.use_threads": "sensors.use_threads",
    "sensors.num_workers": "sensors.num_workers",
    "telemetry.enabled": "telemetry.enabled",
}
# dagster.yaml settings the rendered instance has otherwise, on purpose: each is a row of the table
# "Not as in dagster.yaml" of docs/deployment.md#kubernetes, with the reason. `compute_logs` is not
# written in dagster.yaml: Dagster's default there, LocalComputeLogManager, captures step output.
DIFFERENT = {
    "storage": "dagster-postgres' own storage classes",
    "run_launcher": "K8sRunLauncher",
    "compute_logs": "NoOpComputeLogManager",
    "nux": "not written",
}


def _get(config: Mapping[str, Any], dotted: str) -> Any:
    node: Any = config
    for part in dotted.split("."):
        assert isinstance(node, Mapping) and part in node, (
            f"{dotted}: no {part!r} in the rendered dagster.yaml"
        )
        node = node[part]
    return node


def _leaves(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(_leaves(value, path + "."))
        else:
            out[path] = value
    return out


@pytest.fixture(scope="module")
def rendered() -> dict[str, str]:
    return helm_chart.render()


@pytest.fixture(scope="module")
def instance(rendered) -> dict[str, Any]:
    return helm_chart.instance_config(rendered)


def test_every_setting_of_dagster_yaml_is_rendered_or_documented(instance):
    project = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    settings = _leaves(project)
    undecided = [key for key in settings if key not in RENDERED_PATH and key.split(".")[0] not in DIFFERENT]
    assert not undecided, f"dagster.yaml settings neither in RENDERED_PATH nor in DIFFERENT: {undecided}"
    missing = sorted(set(RENDERED_PATH) - set(settings))
    assert not missing, f"settings of RENDERED_PATH that dagster.yaml lacks: {missing}"
    differing = {
        key: (value, _get(instance, RENDERED_PATH[key]))
        for key, value in settings.items()
        if key in RENDERED_PATH and _get(instance, RENDERED_PATH[key]) != value
    }
    assert not differing, f"dagster.yaml value, rendered value: {differing}"
    # the differences are documented, each with its reason, and they are what the table says
    section = DOCS.read_text().split("## Kubernetes", 1)[1]
    table = section.split("Not as in `dagster.yaml`", 1)[1].split("\n\n", 2)[1]
    rows = {line.split("|")[1].strip().strip("`"): line for line in table.splitlines()[2:]}
    assert set(rows) == set(DIFFERENT), rows
    for key, rendered_as in DIFFERENT.items():
        assert rendered_as in rows[key], (key, rows[key])
        assert len(rows[key].split("|")[3].strip()) > 40, f"no reason given for {key}"
    assert {instance[storage]["module"].split(".")[0] for storage in STORAGES} == {"dagster_postgres"}
    assert "DAGSTER_POSTGRES_URL" not in yaml.safe_dump(instance)  # for `pin-chessboard` in a pod only
    assert project.get("compute_logs") is None  # Dagster's default: captured to local files
    assert instance["compute_logs"]["class"] == "NoOpComputeLogManager"
    assert instance["run_launcher"]["class"] == "K8sRunLauncher"


def test_a_dead_run_worker_is_resumed_and_a_failed_run_retried(instance):
    """On Kubernetes a run pod that died (node drained, evicted) is resumed by run monitoring;
    a run that failed as a whole (not an op's failure) is retried by the daemon."""
    assert instance["run_monitoring"]["enabled"] is True
    assert instance["run_monitoring"]["max_resume_run_attempts"] == 3
    assert instance["run_retries"] == {
        "enabled": True,
        "max_retries": 3,
        "retry_on_asset_or_op_failure": False,
    }


def test_the_storage_connects_with_psycopg2(instance):
    for storage in STORAGES:
        assert instance[storage]["config"]["postgres_db"]["scheme"] == "postgresql+psycopg2", storage


# -- the rendered instance on the test PostgreSQL ---------------------------------------------------


def _on_test_server(postgres_db: Mapping[str, Any], server_url: str) -> dict[str, Any]:
    """postgres_db of the rendered instance with the PostgreSQL Service's host and port replaced by
    the test server's (its socket folder as libpq's `host` parameter when it listens on a socket);
    username, password, database and scheme as rendered."""
    parts = urlsplit(server_url)
    socket_dir = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("host")
    local = dict(postgres_db)
    local["hostname"] = parts.hostname or "localhost"
    local["port"] = parts.port or 5432
    if socket_dir:
        local["params"] = {**(postgres_db.get("params") or {}), "host": socket_dir}
    return local


def local_instance(instance: Mapping[str, Any], server_url: str) -> dict[str, Any]:
    """The rendered dagster.yaml with K8sRunLauncher swapped for the DefaultRunLauncher (and run
    monitoring's resume, which only K8sRunLauncher does, off) and the storages pointed at the test
    server (_on_test_server); nothing else changed."""
    local = copy.deepcopy(dict(instance))
    assert local["run_launcher"]["class"] == "K8sRunLauncher"
    local["run_launcher"] = dict(LOCAL_LAUNCHER)
    # resuming a run is K8sRunLauncher's: Dagster refuses max_resume_run_attempts > 0 with the other
    local["run_monitoring"] = {**local["run_monitoring"], "max_resume_run_attempts": 0}
    for storage in STORAGES:
        config = local[storage]["config"]
        config["postgres_db"] = _on_test_server(config["postgres_db"], server_url)
    return local


@pytest.fixture
def dagster_database(instance, pg_server_url: str) -> Iterator[str]:
    """The role and database the rendered instance names (`dagster`, `dagster`), the role with
    PG_PASSWORD; dropped afterwards. On the suite's own embedded server a database of that name is
    a leftover of an earlier test (`pin-chessboard` commands without DAGSTER_POSTGRES_URL create it)
    and is dropped first; on a server given by CHESSBOARD_DATABASE_URL it is left alone and the test
    fails."""
    postgres_db = instance["run_storage"]["config"]["postgres_db"]
    user, database = postgres_db["username"], postgres_db["db_name"]
    if admin_execute(pg_server_url, f"SELECT 1 FROM pg_database WHERE datname = '{database}'"):
        assert not os.environ.get("CHESSBOARD_DATABASE_URL"), (
            f"database {database} already exists on the server of CHESSBOARD_DATABASE_URL: not used, not dropped"
        )
        admin_execute(pg_server_url, f'DROP DATABASE "{database}" WITH (FORCE)')
    role = admin_execute(pg_server_url, f"SELECT 1 FROM pg_roles WHERE rolname = '{user}'")
    admin_execute(
        pg_server_url,
        f"{'ALTER' if role else 'CREATE'} ROLE \"{user}\" LOGIN PASSWORD '{PG_PASSWORD}'",
        f'CREATE DATABASE "{database}" OWNER "{user}"',
    )
    try:
        yield database
    finally:
        admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def test_the_rendered_instance_opens_migrates_and_records_a_run(instance, dagster_database, pg_server_url):
    import dagster as dg

    home = Path(tempfile.mkdtemp(prefix="helm-instance-"))
    (home / "dagster.yaml").write_text(yaml.safe_dump(local_instance(instance, pg_server_url)))
    run_id = str(uuid.uuid4())
    with _patched_env({"DAGSTER_HOME": str(home), "DAGSTER_PG_PASSWORD": PG_PASSWORD}):
        with dg.DagsterInstance.from_config(str(home)) as first:
            first.upgrade()  # what the chart's migrate Job runs (`dagster instance migrate`)
            first.add_run(dg.DagsterRun(job_name="helm_chart_check", run_id=run_id))
            first.report_engine_event("recorded through the rendered instance", first.get_run_by_id(run_id))
        with dg.DagsterInstance.from_config(str(home)) as second:
            run = second.get_run_by_id(run_id)
            assert run is not None and run.job_name == "helm_chart_check"
            assert [e.message for e in second.all_logs(run_id)] == ["recorded through the rendered instance"]
    shutil.rmtree(home, ignore_errors=True)
    # in the rendered database, as the rendered user
    tables = admin_execute(
        with_database(pg_server_url, dagster_database),
        "SELECT tableowner FROM pg_tables WHERE tablename = 'runs'",
    )
    assert tables == [("dagster",)]


# -- the pods' environment --------------------------------------------------------------------------


def _secrets(chessboard_url: str = "", dagster_url: str = "") -> dict[str, dict[str, str]]:
    """The Secrets docs/deployment.md#kubernetes has the operator create, with test values."""
    return {
        PG_SECRET: {"postgresql-password": PG_PASSWORD},
        USER_SECRET: {
            "CHESSBOARD_DATABASE_URL": chessboard_url or "postgresql://chessboard:x@postgres:5432/chessboard",
            "DAGSTER_POSTGRES_URL": dagster_url or "postgresql://dagster:x@postgres:5432/dagster",
            "TALENT_API_TOKEN": TALENT_TOKEN,
        },
    }


def run_pod_env(rendered: Mapping[str, str], secrets: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """The environment dagster-k8s gives a run pod (and, from the run's, a step pod): the launcher's
    context merged with the code location's DAGSTER_CONTAINER_CONTEXT (includeConfigInLaunchedRuns),
    as K8sContainerContext.create_for_run does, plus DAGSTER_HOME and the PostgreSQL password of
    the launcher's Job config."""
    from dagster_k8s.container_context import K8sContainerContext

    launcher = helm_chart.instance_config(rendered)["run_launcher"]["config"]
    code_env = {item["name"]: item.get("value") for item in helm_chart.user_container(rendered)["env"]}
    context = K8sContainerContext(
        env_config_maps=launcher.get("env_config_maps") or [],
        env_secrets=launcher.get("env_secrets") or [],
        env_vars=launcher.get("env_vars") or [],
    ).merge(K8sContainerContext.create_from_config(json.loads(code_env["DAGSTER_CONTAINER_CONTEXT"])))
    container = context.run_k8s_config.container_config  # env_from, then env, as on the Job's container
    config_maps = helm_chart.config_maps_by_name(rendered)
    env: dict[str, str] = {}
    for source in container.get("env_from", []):
        if "config_map_ref" in source:
            env.update(config_maps[source["config_map_ref"]["name"]])
        else:
            env.update(secrets[source["secret_ref"]["name"]])
    for item in container.get("env", []):
        env[item["name"]] = item["value"]
    env["DAGSTER_HOME"] = launcher["dagster_home"]
    env["DAGSTER_PG_PASSWORD"] = secrets[launcher["postgres_password_secret"]]["postgresql-password"]
    return env


def _project_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        key: value
        for key, value in env.items()
        if key.startswith(
            ("CHESSBOARD_", "TALENT_", "KAFKA_", "DAGSTER_POSTGRES", "DAGSTER_PG", "DAGSTER_HOME")
        )
    }


def test_run_and_step_pods_get_the_environment_of_the_code_server(rendered):
    secrets = _secrets()
    code_server = helm_chart.container_env(rendered, helm_chart.user_container(rendered), secrets)
    run_pod = run_pod_env(rendered, secrets)
    assert _project_env(run_pod) == _project_env(code_server)
    # values.yaml's env, the Secret's variables and the storage password, nothing missing
    (deployment,) = helm_chart.values()["dagster-user-deployments"]["deployments"]
    expected = (
        {item["name"] for item in deployment["env"]} | set(secrets[USER_SECRET]) | {"DAGSTER_PG_PASSWORD"}
    )
    assert expected <= set(run_pod)
    assert run_pod["TALENT_API_TOKEN"] == TALENT_TOKEN and run_pod["DAGSTER_PG_PASSWORD"] == PG_PASSWORD


def test_the_workspace_points_at_the_code_server_of_the_user_deployment(rendered):
    (entry,) = helm_chart.workspace_config(rendered)["load_from"]
    server = entry["grpc_server"]
    (service,) = helm_chart.documents(rendered, helm_chart.USER_DEPLOYMENTS + "service-user.yaml")
    assert server["host"] == service["metadata"]["name"]
    assert server["port"] == service["spec"]["ports"][0]["port"]
    args = helm_chart.user_container(rendered)["args"]
    assert args[args.index("-p") + 1] == str(server["port"])


# -- a stack on the rendered instance and workspace -------------------------------------------------


def _replace_option(argv: list[str], option: str, value: str) -> list[str]:
    """argv with the value after `option` replaced; the option must be there."""
    assert option in argv, (option, argv)
    out = list(argv)
    out[out.index(option) + 1] = value
    return out


def _local_command(argv: list[str], **options: str) -> list[str]:
    """A pod's command here: the executable from this venv, the given options' values replaced."""
    out = [str(BIN / argv[0]), *argv[1:]]
    for option, value in options.items():
        out = _replace_option(out, option, value)
    return out


def _shell_command(container: Mapping[str, Any]) -> list[str]:
    """The argv of a container whose command is `/bin/bash -c "<argv>"`."""
    command = container["command"]
    assert command[:2] == ["/bin/bash", "-c"], command
    return shlex.split(command[2])


def _container(rendered: Mapping[str, str], template: str) -> dict[str, Any]:
    (deployment,) = helm_chart.documents(rendered, f"dagster/templates/{template}")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(900)
def test_an_import_launched_through_the_rendered_webserver_completes(
    rendered, instance, dagster_database, pg_server_url, pg_template_url, kafka_bootstrap
):
    from pin_chessboard_pipelines.talent.simulator import dataset
    from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
    from pin_chessboard_pipelines.talent.simulator.server import SimulatorServer

    spec = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=6)
    base = Path(tempfile.mkdtemp(prefix="helm-stack-"))
    home, logs, state, code_home = base / "dagster_home", base / "logs", base / "state", base / "code_home"
    for folder in (home, logs, state, code_home):
        folder.mkdir()
    (home / "dagster.yaml").write_text(yaml.safe_dump(local_instance(instance, pg_server_url)))
    code_port, web_port = free_port(), free_port()
    workspace = helm_chart.workspace_config(rendered)
    (entry,) = workspace["load_from"]
    location = entry["grpc_server"]["location_name"]
    entry["grpc_server"].update(host="127.0.0.1", port=code_port)
    (base / "workspace.yaml").write_text(yaml.safe_dump(workspace))

    chessboard_db = f"helm_chessboard_{uuid.uuid4().hex[:8]}"
    template = urlsplit(pg_template_url).path.lstrip("/")
    admin_execute(pg_server_url, f'CREATE DATABASE "{chessboard_db}" TEMPLATE "{template}"')
    chessboard_url = libpq_url(with_database(pg_server_url, chessboard_db))
    dagster_url = libpq_url(with_database(pg_server_url, dagster_database))
    secrets = _secrets(chessboard_url, dagster_url)
    simulator = SimulatorServer(spec, token=TALENT_TOKEN).start()
    # what the image and the node give every container: PATH and the like, the image's state folder
    machine = {**_clean_environment(), "PIN_CHESSBOARD_STATE_DIR": str(state), "PYTHONUNBUFFERED": "1"}
    # the cluster's addresses in values.yaml's env, and the step Jobs of the k8s executor
    cluster = {
        "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "TALENT_API_URL": simulator.url,
        "CHESSBOARD_DAGSTER_EXECUTOR": "in_process",
    }
    user = helm_chart.user_container(rendered)
    code_env = helm_chart.container_env(rendered, user, secrets)
    assert set(cluster) <= set(code_env) and code_env["DAGSTER_HOME"] == "/opt/dagster/dagster_home"
    code_env = {**machine, **code_env, **cluster, "DAGSTER_HOME": str(code_home)}
    web, daemon = (
        _container(rendered, "deployment-webserver.yaml"),
        _container(rendered, "deployment-daemon.yaml"),
    )
    web_env = {**machine, **helm_chart.container_env(rendered, web, secrets), "DAGSTER_HOME": str(home)}
    daemon_env = {**machine, **helm_chart.container_env(rendered, daemon, secrets), "DAGSTER_HOME": str(home)}
    workspace_file = str(base / "workspace.yaml")
    commands = {
        "code-server": (_local_command(user["args"], **{"-h": "127.0.0.1", "-p": str(code_port)}), code_env),
        "webserver": (
            _local_command(
                _shell_command(web), **{"-h": "127.0.0.1", "-p": str(web_port), "-w": workspace_file}
            ),
            web_env,
        ),
        "daemon": (_local_command(_shell_command(daemon), **{"-w": workspace_file}), daemon_env),
    }
    stack = DagsterStack(
        home=home,
        env=web_env,
        webserver_url=f"http://127.0.0.1:{web_port}",
        chessboard_url=chessboard_url,
        dagster_url=dagster_url,
        logs=logs,
        graphql=DagsterGraphQL(f"http://127.0.0.1:{web_port}", location=location),
    )
    try:
        with running_stack(stack, commands, ready_timeout=240):
            gql = stack.graphql
            with _patched_env({"DAGSTER_HOME": str(home), "DAGSTER_PG_PASSWORD": PG_PASSWORD}):
                import dagster as dg

                with dg.DagsterInstance.from_config(str(home)) as dagster_instance:
                    partitions = wait_until(  # the discovery sensor's first tick adds them
                        lambda: (
                            len(found := dagster_instance.get_dynamic_partitions("talent_developers"))
                            == spec.developers
                            and found
                        ),
                        timeout=180,
                        what="the developer partitions",
                    )
            run_id = gql.launch_job(
                "talent_initial_import",
                run_config={"resources": {"talent_import": {"config": {"page_size": 2, "workers": 1}}}},
                tags={
                    "dagster/asset_partition_range_start": partitions[0],
                    "dagster/asset_partition_range_end": partitions[-1],
                },
            )
            done = gql.wait_for_run(run_id, timeout=420)
            assert done["status"] == "SUCCESS", (gql.run_messages(run_id)[-20:], stack.log_tail())
            with stack.engine.connect() as conn:
                count = conn.execute(sa.text("SELECT count(*) FROM chessboard.property_objects")).scalar_one()
                status = conn.execute(
                    sa.text("SELECT status FROM chessboard.talent_import_runs WHERE dagster_run_id = :id"),
                    {"id": run_id},
                ).scalar_one()
            assert (count, status) == (dataset.count(spec, "property-objects"), "Completed")
            # the run went through the rendered instance's storage, the project's log lines with it
            assert any("page" in message for message in gql.run_messages(run_id)), gql.run_messages(run_id)[
                -10:
            ]
    finally:
        simulator.stop()
        stack.engine.dispose()
        admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{chessboard_db}" WITH (FORCE)')
        shutil.rmtree(base, ignore_errors=True)

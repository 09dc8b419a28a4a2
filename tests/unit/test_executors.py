"""CHESSBOARD_DAGSTER_EXECUTOR chooses Dagster's executor of the import and recalc jobs
(defs/executors.py); the definitions load in a fresh interpreter per value, so no test leaves
another executor behind in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dagster as dg
import pytest

from pin_chessboard_pipelines.defs.executors import (
    K8S_EXTRA_MISSING,
    MULTIPROCESS_EXECUTOR,
    build_executor,
    forkserver_by_default,
)
from pin_chessboard_pipelines.defs.fan_out import concurrent_steps_config
from pin_chessboard_pipelines.errors import ConfigError

# the jobs that follow the variable, and those that stay in process whatever it says
FOLLOWING = ("talent_initial_import", "project_aggregates_recalc", "chessboard_aggregates_audit")
IN_PROCESS = ("talent_sync", "outbox_relay", "run_history_retention", "talent_replay_failed")

# one fresh interpreter builds the definitions once per value (unset first)
PROBE = """
import json, os, sys
from pin_chessboard_pipelines.definitions import build_definitions
found = {}
for value in [None, "in_process", "multiprocess", "k8s"]:
    if value is None:
        os.environ.pop("CHESSBOARD_DAGSTER_EXECUTOR", None)
    else:
        os.environ["CHESSBOARD_DAGSTER_EXECUTOR"] = value
    defs = build_definitions()
    found[str(value)] = {name: defs.resolve_job_def(name).executor_def.name for name in sys.argv[1:]}
print(json.dumps(found))
"""


def test_the_variable_chooses_the_executor_of_the_import_and_recalc_jobs():
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *FOLLOWING, *IN_PROCESS],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    found = json.loads(done.stdout.splitlines()[-1])
    expected = {
        "None": "in_process",
        "in_process": "in_process",
        "multiprocess": "multiprocess",
        "k8s": "k8s",
    }
    for value, executor in expected.items():
        assert {name: found[value][name] for name in FOLLOWING} == dict.fromkeys(FOLLOWING, executor)
        assert {name: found[value][name] for name in IN_PROCESS} == dict.fromkeys(IN_PROCESS, "in_process")


def test_an_invalid_name_is_one_config_error():
    with pytest.raises(
        ConfigError,
        match=r"^CHESSBOARD_DAGSTER_EXECUTOR='celery' is invalid: expected in_process \| multiprocess \| k8s$",
    ):
        build_executor("celery")


def test_k8s_without_the_extra_is_one_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "dagster_k8s", None)  # what `import dagster_k8s` meets without the extra
    with pytest.raises(ConfigError) as raised:
        build_executor("k8s")
    assert str(raised.value) == K8S_EXTRA_MISSING
    assert "\n" not in K8S_EXTRA_MISSING


def test_an_invalid_value_stops_the_cli_with_one_line_and_exit_2():
    done = subprocess.run(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", "recalc", "status"],
        env={**os.environ, "CHESSBOARD_DAGSTER_EXECUTOR": "threads"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "CHESSBOARD_DAGSTER_EXECUTOR='threads' is invalid: expected in_process | multiprocess | k8s"
    ]


def test_a_multiprocess_run_starts_all_its_page_steps_or_drains_at_once():
    assert concurrent_steps_config(3, "multiprocess") == {"execution": {"config": {"max_concurrent": 3}}}
    assert concurrent_steps_config(1, "multiprocess") == {}
    assert concurrent_steps_config(3, "in_process") == concurrent_steps_config(3, "k8s") == {}


def test_the_bootstrap_and_the_recalc_sensor_ask_for_their_steps_on_a_2_cpu_host(monkeypatch):
    # the multiprocess executor's own default is one step per CPU: processes 3 would run 2
    from pin_chessboard_pipelines.definitions import build_definitions
    from pin_chessboard_pipelines.defs.recalc.definitions import JOB_NAME, drain_run_config
    from pin_chessboard_pipelines.defs.talent_import import launch
    from pin_chessboard_pipelines.defs.talent_import.config import IMPORT_JOB, FullBootstrapConfig

    monkeypatch.setenv("CHESSBOARD_DAGSTER_EXECUTOR", "multiprocess")
    monkeypatch.setenv("CHESSBOARD_RECALC_DRAINS", "4")
    defs = build_definitions()
    imported = launch.import_run_config(FullBootstrapConfig(processes=3))
    drained = drain_run_config(4, {"until_empty": True})
    assert imported["execution"] == {"config": {"max_concurrent": 3}}
    assert drained["execution"] == {"config": {"max_concurrent": 4}}
    assert dg.validate_run_config(defs.resolve_job_def(IMPORT_JOB), imported)
    assert dg.validate_run_config(defs.resolve_job_def(JOB_NAME), drained)


@dg.op
def parent_pid() -> int:
    return os.getppid()


@dg.job(executor_def=MULTIPROCESS_EXECUTOR)
def parent_pid_job() -> None:
    parent_pid()


def test_multiprocess_steps_start_from_a_forkserver_unless_the_run_config_says_spawn(tmp_path):
    assert forkserver_by_default({"max_concurrent": 3}) == {
        "max_concurrent": 3,
        "start_method": {"forkserver": {}},
    }
    spawn = {"max_concurrent": 3, "start_method": {"spawn": {}}}
    assert forkserver_by_default(spawn) == spawn
    parents = {}
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        for name, config in {"default": {}, "spawn": {"start_method": {"spawn": {}}}}.items():
            with dg.execute_job(
                dg.reconstructable(parent_pid_job),
                instance=instance,
                run_config={"execution": {"config": config}},
            ) as result:
                assert result.success
                parents[name] = result.output_for_node("parent_pid")
    # spawn: the step is a child of the run's process (this one); forkserver: of the forkserver
    assert parents["spawn"] == os.getpid()
    assert parents["default"] != os.getpid()


def test_the_multiprocess_copy_takes_the_run_config_of_dagsters_multiprocess_executor():
    ours = MULTIPROCESS_EXECUTOR.config_schema.as_field().config_type
    dagsters = dg.multiprocess_executor.config_schema.as_field().config_type
    assert MULTIPROCESS_EXECUTOR.name == dg.multiprocess_executor.name
    assert (
        set(ours.fields)
        == set(dagsters.fields)
        >= {"max_concurrent", "tag_concurrency_limits", "start_method"}
    )

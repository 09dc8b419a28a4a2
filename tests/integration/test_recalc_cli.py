"""`pin-chessboard recalc …`: the runbook as commands (docs/project-aggregates-recalc.md#runbook)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import dagster as dg
import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.defs.recalc.definitions import JOB_NAME
from tests.support.recalc_data import StoreBuilder, queue, standard_project


@pytest.fixture
def cli_env(cli_env, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_RECALC_DEBOUNCE_SECONDS", "30")
    return cli_env


def _last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_request_debounced_and_now(cli_env, engine, capsys):
    with engine.begin() as conn:
        project = standard_project(StoreBuilder(conn))
    assert main(["recalc", "request", "--project-id", str(project.id)]) == 0
    first = _last_json(capsys.readouterr().out)
    assert first["requestedCount"] == 1 and first["lastReason"] == "Crud"
    assert main(["recalc", "request", "--project-id", str(project.id), "--now"]) == 0
    second = _last_json(capsys.readouterr().out)
    assert second["requestedCount"] == 2
    assert second["dueAt"] < first["dueAt"]  # forced: due now, not after the debounce


def test_request_for_an_unknown_project_is_refused(cli_env, capsys):
    assert main(["recalc", "request", "--project-id", str(uuid.uuid4())]) == 2
    assert "not in the chessboard store" in capsys.readouterr().err


def test_bad_project_id_is_refused(cli_env, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["recalc", "request", "--project-id", "nope"])
    assert exit_info.value.code == 2
    assert "is not a UUID" in capsys.readouterr().err


def test_reset_poison(cli_env, engine, capsys):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project, due_in_seconds=3600, attempt_count=5)
    assert main(["recalc", "reset-poison", "--project-id", str(project.id)]) == 0
    row = _last_json(capsys.readouterr().out)
    assert row["attemptCount"] == 0
    with engine.connect() as conn:
        due = conn.execute(
            sa.text("SELECT due_at <= now() FROM chessboard.project_recalc_requests WHERE project_id = :p"),
            {"p": project.id},
        ).scalar()
    assert due
    assert main(["recalc", "reset-poison", "--project-id", str(uuid.uuid4())]) == 2


def test_audit_lists_every_divergence_and_exits_1(cli_env, engine, capsys):
    with engine.begin() as conn:
        project = standard_project(StoreBuilder(conn))
    # a fresh replica has every aggregate at 0/NULL: the audit sees the missing recalc
    assert main(["recalc", "audit", "--project-id", str(project.id)]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith(f"{len(out) - 1} divergence(s)")
    assert any(
        "project" in line and "property_objects_free_count stored=0 expected=4" in line for line in out
    )
    assert any("price_min stored=NULL expected=4500000.50" in line for line in out)


def test_drain_runs_the_job_through_the_instance(cli_env, engine, capsys):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b) for _ in range(3)]
        for p in projects:
            b.request(p)
        later = standard_project(b)
        b.request(later, due_in_seconds=3600)
    assert main(["recalc", "drain", "--until-empty"]) == 0
    summary = _last_json(capsys.readouterr().out)
    assert summary["status"] == "Completed"
    assert summary["recalculated"] == 3
    with engine.connect() as conn:
        assert set(queue(conn)) == {later.id}  # not yet due: stays queued
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(summary["runId"])
        assert run is not None and run.job_name == JOB_NAME
        assert run.status == dg.DagsterRunStatus.SUCCESS
    capsys.readouterr()
    # `later` is not recalculated yet, but its request is queued: pending, not drift
    assert main(["recalc", "audit"]) == 0
    assert "pending in 1 queued project(s)" in capsys.readouterr().out
    assert main(["recalc", "request", "--project-id", str(later.id), "--now"]) == 0
    assert main(["recalc", "drain"]) == 0
    assert main(["recalc", "audit"]) == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith("0 divergence(s) in all live projects; 0 pending in 0 queued project(s)")
    )


def test_drain_on_the_multiprocess_executor_runs_each_drain_in_a_process_of_its_own(cli_env, engine):
    # a command of its own: the definitions load once per process, with the variables it starts with
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        for _ in range(6):
            b.request(standard_project(b))
    env = {**os.environ, "CHESSBOARD_DAGSTER_EXECUTOR": "multiprocess", "CHESSBOARD_RECALC_DRAINS": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", "recalc", "drain", "--until-empty"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = _last_json(done.stdout)
    assert summary["status"] == "Completed"
    assert summary["recalculated"] == 6  # the two drains' figures merged: each project once
    with engine.connect() as conn:
        assert queue(conn) == {}
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(summary["runId"])
        assert run is not None and run.run_config["execution"] == {"config": {"max_concurrent": 2}}
        starts = [
            record.dagster_event
            for record in instance.all_logs(summary["runId"])
            if record.dagster_event is not None
            and record.dagster_event.is_step_start
            and record.dagster_event.step_key != "start_drains"
        ]
    assert sorted(e.step_key for e in starts) == ["drain[1]", "drain_0"]
    pids = {e.pid for e in starts}
    assert len(pids) == 2 and os.getpid() not in pids  # two processes, neither this one


def test_status_waits_while_the_queue_drains(cli_env, engine, capsys):
    import threading

    from pin_chessboard_pipelines.recalc.drain import drain

    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b, name=f"Project {i}") for i in range(2)]
        for p in projects:
            b.request(p)
    drainer = threading.Timer(0.3, lambda: drain(engine))
    drainer.start()
    try:
        assert main(["recalc", "status", "--wait", "20", "--projects", "2"]) == 0
    finally:
        drainer.join()
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("recalc queue: 2 row(s)")
    assert any(line.startswith("recalc queue: 0 row(s)") for line in out)
    assert any(
        line.startswith("Project 0") and "4/6" in line and "4500000.50..7000000" in line for line in out
    )
    assert json.loads(out[-1])["queueDepth"] == 0


def test_status_wait_times_out_on_rows_not_yet_due(cli_env, engine, capsys):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        b.request(standard_project(b), due_in_seconds=3600)
    assert main(["recalc", "status", "--wait", "0.5"]) == 1
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["queueDepth"] == 1

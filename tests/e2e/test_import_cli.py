"""`pin-chessboard import` as operators and scripts run it: exit codes, one-line refusals, the
result JSON on the last line of stdout, the run in the Dagster instance, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.talent_import.partitions import partition_key
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.engine import sqlalchemy_url, with_database
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset
from pin_chessboard_pipelines.talent_import.lock import ImportLock
from tests.support.command_env import command_env
from tests.support.talent_kafka import own_broker

SPEC = DatasetSpec(developers=2, projects_per_developer=2, objects_per_project=15)


@pytest.fixture
def cli_env(tmp_path: Path, db_url: str) -> dict[str, str]:
    return command_env(db_url, tmp_path, dagster_home=tmp_path / "dagster_home")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pin_chessboard_pipelines.cli", "import", *args]


def _run(env: dict[str, str], *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        _command(*args), env=env, capture_output=True, text=True, timeout=timeout, cwd=PROJECT_ROOT
    )


def _result(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("args", "extra_env", "line"),
    [
        (
            [
                "--developer-id",
                "6f1c8a52-1c0e-5c3e-9d1a-7f0b2c4d6e8a",
                "--project-id",
                "6f1c8a52-1c0e-5c3e-9d1a-7f0b2c4d6e8b",
            ],
            {},
            "CHESSBOARD_IMPORT_INVALID_REQUEST: DeveloperIdFilter and ProjectIdFilter are mutually exclusive",
        ),
        (
            ["--page-size", "2001"],
            {},
            "CHESSBOARD_IMPORT_INVALID_REQUEST: PageSize 2001 is out of range 1..2000",
        ),
        ([], {"CHESSBOARD_TALENT_SYNC_ENABLED": "false"}, "CHESSBOARD_IMPORT_DISABLED: "),
    ],
    ids=["both-filters", "page-size", "flag-off"],
)
def test_refusals_exit_2_with_one_line(cli_env, talent_sim, args, extra_env, line):
    sim = talent_sim(SPEC)
    done = _run({**cli_env, "TALENT_API_URL": sim.url, **extra_env}, *args)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(line)
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_an_unavailable_source_is_refused(cli_env, talent_sim, engine):
    sim = talent_sim(SPEC)
    sim.available = False
    done = _run({**cli_env, "TALENT_API_URL": sim.url})
    assert done.returncode == 2
    assert (
        done.stderr.strip().splitlines()[-1]
        == "CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: GET /health answered 503"
    )
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.talent_import_runs")).scalar() == 0


def test_topic_replay_without_the_talent_topics_is_refused(cli_env, engine):
    with own_broker() as broker:
        done = _run({**cli_env, "KAFKA_BOOTSTRAP_SERVERS": broker}, "--mode", "TopicReplay")
    assert done.returncode == 2, done.stderr[-3000:]
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: TopicReplay: Talent topic(s) missing")
    )
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.talent_import_runs")).scalar() == 0


@pytest.mark.slow
def test_a_topic_replay_imports_the_compacted_topics(cli_env, engine):
    with own_broker() as broker:
        publish_dataset(SPEC, broker)
        done = _run(
            {**cli_env, "KAFKA_BOOTSTRAP_SERVERS": broker}, "--mode", "TopicReplay", "--page-size", "9"
        )
    assert done.returncode == 0, done.stderr[-3000:]
    result = _result(done.stdout)
    assert (result["mode"], result["status"]) == ("TopicReplay", "Completed")
    assert result["stages"]["PropertyObjects"] == {"planned": 60, "applied": 60, "skipped": 0, "failed": 0}
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.property_objects")).scalar() == 60


def test_a_held_lock_is_refused(cli_env, talent_sim, db_url):
    sim = talent_sim(SPEC)
    with ImportLock(db_url) as other:
        other.acquire(timeout=0)
        done = _run({**cli_env, "TALENT_API_URL": sim.url, "CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS": "0.5"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("CHESSBOARD_IMPORT_LOCK_HELD: ")


@pytest.mark.slow
def test_an_import_runs_through_dagster_and_prints_its_result(
    cli_env, talent_sim, engine, db_url, monkeypatch
):
    import dagster as dg

    sim = talent_sim(SPEC)
    done = _run({**cli_env, "TALENT_API_URL": sim.url}, "--page-size", "7", "--workers", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    result = _result(done.stdout)
    assert set(result) == {"runId", "correlationId", "mode", "status", "dryRun", "durationSeconds", "stages"}
    assert (result["status"], result["mode"], result["dryRun"]) == ("Completed", "ApiPull", False)
    assert result["stages"]["PropertyObjects"] == {"planned": 60, "applied": 60, "skipped": 0, "failed": 0}
    assert list(result["stages"]) == [
        "Developers",
        "Projects",
        "Buildings",
        "LayoutGroups",
        "Layouts",
        "PropertyObjects",
    ]
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.property_objects")).scalar() == 60
    # the run is in the instance of DAGSTER_HOME (the UI's history), over both developer partitions
    # (the CLI put Dagster's storage in database `dagster` of the chessboard's server)
    monkeypatch.setenv("DAGSTER_POSTGRES_URL", sqlalchemy_url(with_database(db_url, "dagster")))
    instance = dg.DagsterInstance.from_config(cli_env["DAGSTER_HOME"])
    try:
        run = instance.get_run_by_id(result["correlationId"])
        assert run is not None and run.status == dg.DagsterRunStatus.SUCCESS
        assert run.job_name == "talent_initial_import"
        # launched with the code location's origin: listed under its job, re-executable from the UI
        assert run.remote_job_origin is not None
        assert (
            run.remote_job_origin.repository_origin.get_label() == "__repository__@pin_chessboard_pipelines"
        )
        listed = instance.get_runs(  # how the job's Runs page finds its runs
            filters=dg.RunsFilter(
                job_name="talent_initial_import",
                tags={".dagster/repository": "__repository__@pin_chessboard_pipelines"},
            )
        )
        # (the `dagster` database is the server's, so other tests' runs may be listed beside it)
        assert run.run_id in {r.run_id for r in listed}
        # partitions read as the developers: name, then Talent id
        assert sorted(instance.get_dynamic_partitions("talent_developers")) == sorted(
            partition_key(
                dataset.entity_id(SPEC, "developers", i), dataset.item(SPEC, "developers", i)["name"]
            )
            for i in range(2)
        )
    finally:
        instance.dispose()

    # the same import again: a new run, a no-op by the version guard
    again = _run({**cli_env, "TALENT_API_URL": sim.url}, "--page-size", "7")
    assert again.returncode == 0
    second = _result(again.stdout)
    assert second["runId"] != result["runId"]
    assert second["stages"]["PropertyObjects"] == {"planned": 60, "applied": 0, "skipped": 60, "failed": 0}


@pytest.mark.slow
def test_ctrl_c_cancels_after_the_current_page_and_the_next_import_resumes(cli_env, talent_sim, engine):
    spec = DatasetSpec(**{**SPEC.__dict__, "latency_ms": 40})
    sim = talent_sim(spec)
    env = {**cli_env, "TALENT_API_URL": sim.url}
    proc = subprocess.Popen(
        _command("--page-size", "2", "--workers", "1"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
    )
    deadline = time.monotonic() + 120
    done_pages = 0
    while done_pages < 2 and time.monotonic() < deadline and proc.poll() is None:
        with engine.connect() as conn:
            done_pages = conn.execute(
                sa.text(
                    "SELECT count(*) FROM chessboard.talent_import_pages WHERE stage = 'Layouts' AND status = 'Done'"
                )
            ).scalar()
        time.sleep(0.05)  # polling the store with a deadline
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr[-3000:]
    result = _result(stdout)
    assert result["status"] == "Cancelled"
    with engine.connect() as conn:
        statuses = dict(
            conn.execute(
                sa.text("SELECT status, count(*) FROM chessboard.talent_import_pages GROUP BY status")
            ).all()
        )
    assert "InProgress" not in statuses and statuses["Done"] >= 2
    resumed = _run(env, "--page-size", "2", "--workers", "2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = _result(resumed.stdout)
    assert final["runId"] == result["runId"] and final["status"] == "Completed"
    assert final["stages"]["PropertyObjects"]["applied"] == 60

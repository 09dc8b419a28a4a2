"""Dagster's run retries as dagster.yaml configures them: a run failed because its worker died is
retried (up to 3 times a run group), a run failed by a step is not, the sensor-driven jobs are never
retried, and a retried full bootstrap hands on the import its failed parent submitted
(docs/deployment.md#run-retries; the whole path on the standard deployment:
tests/e2e/test_import_run_retry.py)."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from pin_chessboard_pipelines.definitions import build_definitions
from pin_chessboard_pipelines.defs.talent_import import config as talent_config
from pin_chessboard_pipelines.defs.talent_import.launch import LAUNCHED_BY_TAG, earlier_import
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from tests.support.dagster_private import JobFailureData, RunFailureReason, auto_reexecution_should_retry_run

SENSOR_DRIVEN = ("project_aggregates_recalc", "outbox_relay", "talent_sync", "handbook_sync")


def _run_retries() -> dict:
    return yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8"))["run_retries"]


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    return build_definitions()


def test_dagster_yaml_retries_a_dead_worker_s_run_three_times_and_no_failed_step():
    assert _run_retries() == {"enabled": True, "max_retries": 3, "retry_on_asset_or_op_failure": False}
    with dg.instance_for_test(overrides={"run_retries": _run_retries()}) as instance:
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 3
        assert "EVENT_LOG_CONSUMER" in instance.get_required_daemon_types()  # the daemon that retries


def _failed(
    instance: dg.DagsterInstance, job: dg.JobDefinition, reason: RunFailureReason | None
) -> dg.DagsterRun:
    run = instance.create_run_for_job(job, tags=dict(job.tags))
    instance.report_run_failed(run, job_failure_data=JobFailureData(error=None, failure_reason=reason))
    failed = instance.get_run_by_id(run.run_id)
    assert failed is not None and failed.status == dg.DagsterRunStatus.FAILURE
    return failed


def _will_retry(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    raw = run.tags.get("dagster/failure_reason")
    return auto_reexecution_should_retry_run(instance, run, RunFailureReason(raw) if raw else None)


def test_an_import_run_is_retried_when_its_worker_died_not_when_a_step_failed(defs):
    job = defs.resolve_job_def(talent_config.IMPORT_JOB)
    with dg.instance_for_test(overrides={"run_retries": _run_retries()}) as instance:
        # the code server's report of a dead run worker carries no reason; run monitoring's may
        assert _will_retry(instance, _failed(instance, job, None))
        assert _will_retry(instance, _failed(instance, job, RunFailureReason.START_TIMEOUT))
        # a refused request or a page failed for good fails its step: failed for the operator to see
        assert not _will_retry(instance, _failed(instance, job, RunFailureReason.STEP_FAILURE))


@pytest.mark.parametrize("job_name", SENSOR_DRIVEN)
def test_the_sensor_driven_jobs_are_not_retried_their_sensor_launches_the_next_run(defs, job_name):
    job = defs.resolve_job_def(job_name)
    assert job.tags["dagster/max_retries"] == "0"
    with dg.instance_for_test(overrides={"run_retries": _run_retries()}) as instance:
        assert not _will_retry(instance, _failed(instance, job, None))


def test_the_import_and_bootstrap_jobs_take_the_instance_s_retries(defs):
    for name in (talent_config.IMPORT_JOB, talent_config.BOOTSTRAP_JOB):
        assert "dagster/max_retries" not in defs.resolve_job_def(name).tags


def test_a_re_executed_failed_bootstrap_hands_on_the_import_its_parent_submitted(defs):
    bootstrap = defs.resolve_job_def(talent_config.BOOTSTRAP_JOB)
    imports = defs.resolve_job_def(talent_config.IMPORT_JOB)
    with dg.instance_for_test() as instance:
        first = _failed(instance, bootstrap, None)  # killed after its submit
        submitted = instance.create_run_for_job(imports, tags={LAUNCHED_BY_TAG: first.run_id})
        # the daemon's retry of the retry: the chain of failed parents is followed
        retry = _failed_child(instance, bootstrap, first)
        second = instance.create_run_for_job(bootstrap, parent_run_id=retry.run_id, root_run_id=first.run_id)
        assert earlier_import(instance, second).run_id == submitted.run_id  # type: ignore[union-attr]

        # a first run, or a re-execution of a bootstrap that succeeded: an import of its own
        assert earlier_import(instance, first) is None
        done = instance.create_run_for_job(bootstrap, status=dg.DagsterRunStatus.SUCCESS)
        instance.create_run_for_job(imports, tags={LAUNCHED_BY_TAG: done.run_id})
        again = instance.create_run_for_job(bootstrap, parent_run_id=done.run_id, root_run_id=done.run_id)
        assert earlier_import(instance, again) is None


def _failed_child(
    instance: dg.DagsterInstance, job: dg.JobDefinition, parent: dg.DagsterRun
) -> dg.DagsterRun:
    run = instance.create_run_for_job(
        job, parent_run_id=parent.run_id, root_run_id=parent.root_run_id or parent.run_id
    )
    instance.report_run_failed(run)
    failed = instance.get_run_by_id(run.run_id)
    assert failed is not None
    return failed

"""The one-home declarations: a consumer's log events from its name, a sensor's description from its
docstring, a one-op job in the run's process, a UTC schedule running from the start."""

import dataclasses

import dagster as dg

from pin_chessboard_pipelines.defs.declare import one_op_job, running_sensor, utc_schedule
from pin_chessboard_pipelines.handbook_sync import HandbookSync
from pin_chessboard_pipelines.talent_sync import TalentSync


def test_each_consumer_names_its_loop_events_in_its_own_spelling():
    talent = "talent_sync_consumer_error talent_sync_retry talent_sync_commit_failed talent_sync_relay_failed"
    handbook = "handbook-sync-consumer-error handbook-sync-retry handbook-sync-commit-failed"
    assert dataclasses.astuple(TalentSync.events) == (*talent.split(), "talent_sync_dead_letter")
    assert dataclasses.astuple(HandbookSync.events) == (
        *handbook.split(),
        "handbook-sync-relay-failed",
        "handbook-sync-dead-letter",
    )


@dg.op
def _noop() -> None:
    pass


def test_a_sensor_runs_from_the_start_with_its_docstring_as_one_line_of_description():
    @running_sensor("probe_sensor", 7, job_name="probe_job")
    def probe(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        """Every 7 s: a probe,
        on two lines."""
        return dg.SkipReason("nothing")

    assert probe.name == "probe_sensor"
    assert probe.minimum_interval_seconds == 7
    assert probe.default_status is dg.DefaultSensorStatus.RUNNING
    assert probe.description == "Every 7 s: a probe, on two lines."


def test_a_one_op_job_runs_in_process_and_a_schedule_keeps_utc():
    job = one_op_job("probe_job", _noop, "a probe", tags={"pin/probe": "1"})
    assert job.name == "probe_job" and job.description == "a probe"
    assert job.executor_def is dg.in_process_executor
    assert job.tags["pin/probe"] == "1"
    assert job.execute_in_process().success

    schedule = utc_schedule("probe_daily", job, "5 4 * * *", "daily probe")
    assert schedule.execution_timezone == "UTC"
    assert schedule.default_status is dg.DefaultScheduleStatus.RUNNING
    assert (schedule.cron_schedule, schedule.job_name) == ("5 4 * * *", "probe_job")

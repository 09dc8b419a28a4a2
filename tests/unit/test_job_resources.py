"""Each op job's launchpad asks for its own resources only (defs/resources.py with_job_resources)."""

from __future__ import annotations

import pytest


def _resource_fields(job_name: str) -> set[str]:
    from pin_chessboard_pipelines.definitions import defs

    job = defs.get_repository_def().get_job(job_name)
    return set(job.run_config_schema.config_type.fields["resources"].config_type.fields)


@pytest.mark.parametrize(
    "job_name",
    ["project_aggregates_recalc", "recalc_runbook", "talent_replay_failed", "outbox_relay", "talent_sync"],
)
def test_an_op_job_carries_only_the_resources_its_ops_use(job_name):
    assert _resource_fields(job_name) == {"chessboard", "io_manager"}


def test_a_schedule_runs_the_bound_job():
    import dagster as dg

    from pin_chessboard_pipelines.definitions import defs

    for schedule in defs.schedules or []:
        if isinstance(schedule, dg.ScheduleDefinition) and isinstance(schedule.job, dg.JobDefinition):
            assert set(schedule.job.resource_defs) == {"chessboard", "io_manager"}, schedule.name

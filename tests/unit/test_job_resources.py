"""Each job's launchpad asks for its own resources only (defs/resources.py with_job_resources): an op
job for its ops', an asset job for its assets' and checks'."""

from __future__ import annotations

import pytest


def _resource_fields(job_name: str) -> set[str]:
    from pin_chessboard_pipelines.definitions import defs as load_defs

    defs = load_defs()

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

    from pin_chessboard_pipelines.definitions import defs as load_defs

    defs = load_defs()

    repository = defs.get_repository_def()
    for schedule in defs.schedules or []:
        if isinstance(schedule, dg.ScheduleDefinition) and isinstance(schedule.job, dg.JobDefinition):
            bound = repository.get_job(schedule.job_name)
            assert set(schedule.job.resource_defs) == set(bound.resource_defs), schedule.name
            assert "talent_import" not in schedule.job.resource_defs, schedule.name


@pytest.mark.parametrize(
    ("job_name", "resources"),
    [
        ("chessboard_aggregates_audit", {"chessboard", "io_manager"}),
        ("outbox_lag_check", {"chessboard", "io_manager"}),
        ("talent_initial_import", {"chessboard", "io_manager", "talent_import"}),
        ("project_inventory_daily_job", {"chessboard", "io_manager", "analytics_io_manager"}),
        ("talent_full_bootstrap", {"chessboard", "io_manager"}),
    ],
)
def test_an_asset_job_carries_only_the_resources_of_its_assets_and_checks(job_name, resources):
    # (an upstream asset's resources stay out: the inventory reads property_objects, never talent_import)
    assert _resource_fields(job_name) == resources


def test_materialize_keeps_every_resource():
    assert {"talent_import", "analytics_io_manager", "chessboard"} <= _resource_fields("__ASSET_JOB")

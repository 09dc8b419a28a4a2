"""The inventory's freshness is Dagster's own: `project_inventory_daily` carries a time-window
FreshnessPolicy (warn after 26 h, fail after 50 h) and the instance dagster.yaml configures runs the
freshness daemon that evaluates it and shows the state on the asset's page (README, analytics)."""

from __future__ import annotations

from datetime import timedelta

import dagster as dg
import yaml

from pin_chessboard_pipelines.definitions import build_definitions
from pin_chessboard_pipelines.defs.analytics import definitions as analytics
from pin_chessboard_pipelines.settings import PROJECT_ROOT


def test_the_inventory_asset_warns_after_26_hours_and_fails_after_50():
    specs = {spec.key: spec for spec in build_definitions().resolve_all_asset_specs()}
    policy = specs[analytics.ASSET_KEY].freshness_policy
    assert policy == dg.FreshnessPolicy.time_window(
        fail_window=timedelta(hours=50), warn_window=timedelta(hours=26)
    )
    # the only asset with a policy: the other assets are kept by sensors, not by a clock
    assert [key for key, spec in specs.items() if spec.freshness_policy] == [analytics.ASSET_KEY]


def test_no_job_or_check_of_the_project_evaluates_the_inventory_s_freshness():
    repo = build_definitions().get_repository_def()
    checks = {key.name for key in repo.asset_graph.asset_check_keys if key.asset_key == analytics.ASSET_KEY}
    assert checks == {analytics.DRIFT_CHECK}
    assert {job.name for job in repo.get_all_jobs() if "freshness" in job.name} == set()


def test_the_instance_of_dagster_yaml_runs_the_freshness_daemon():
    config = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8"))
    config.pop("storage")  # PostgreSQL: the test instance's own storage instead
    with dg.instance_for_test(overrides=config) as instance:
        assert "FRESHNESS_DAEMON" in instance.get_required_daemon_types()

"""The Dagster shape of the import, pinned: assets and their edges, partitions, backfill policy,
checks, jobs, sensors and the launchpad config."""

from __future__ import annotations

import uuid

import dagster as dg

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import import config as talent_config
from pin_chessboard_pipelines.defs.talent_import.assets import STAGE_ASSETS
from pin_chessboard_pipelines.defs.talent_import.definitions import definitions
from pin_chessboard_pipelines.defs.talent_import.session import mixed_filters_refusal
from pin_chessboard_pipelines.entities import ENTITIES

NAMES = ["developers", "projects", "buildings", "layout_groups", "layouts", "property_objects"]


def test_six_partitioned_assets_chained_by_the_stage_barriers():
    assert [talent_config.asset_name(s) for s in ENTITIES] == NAMES
    by_key = {a.key: a for a in STAGE_ASSETS}
    assert [k.to_user_string() for k in by_key] == NAMES
    for parent, child in zip(NAMES, NAMES[1:], strict=False):
        assert by_key[dg.AssetKey(child)].dependency_keys == {
            dg.AssetKey(parent),
            dg.AssetKey(["talent", child]),  # the Talent source, an external asset
        }
    assert by_key[dg.AssetKey("developers")].dependency_keys == {dg.AssetKey(["talent", "developers"])}
    for asset in STAGE_ASSETS:
        assert asset.partitions_def == talent_config.TALENT_DEVELOPERS
        # one import at a time on every path: the run queue holds a second run of the pool
        ops = list(asset.node_def.iterate_op_defs())
        assert {op.pool for op in ops} == {"talent_import"}
        # plan -> one page step per process (the page op mapped over the plan's outputs) -> barrier
        name = asset.key.to_user_string()
        assert sorted(op.name for op in ops) == sorted([f"{name}_plan", f"{name}_barrier", f"{name}_pages"])
        assert asset.specs_by_key[asset.key].owners == ["team:pin-platform-core"]
        assert asset.backfill_policy == dg.BackfillPolicy.single_run()
        assert asset.group_names_by_key[asset.key] == "talent_import"
        assert {c.name for c in asset.check_specs} == {"no_quarantined_items"}
    assert talent_config.TALENT_DEVELOPERS.name == "talent_developers"


def test_jobs_sensors_checks_and_config():
    defs = dg.Definitions.merge(
        definitions(),
        dg.Definitions(resources={"chessboard": ChessboardResource()}),
    )
    job = defs.resolve_job_def("talent_initial_import")
    assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == set(NAMES)
    assert job.tags["pin/import"] == "talent_initial_import"
    assert defs.resolve_job_def("talent_developers_discovery") is not None
    assert {s.name for s in defs.sensors} == {
        "talent_developers_sensor",
        "talent_import_stuck_sensor",
        "talent_import_canceled_sensor",
        "talent_import_failure_sensor",
    }
    assert defs.resolve_sensor_def("talent_import_stuck_sensor").minimum_interval_seconds == 60
    checks = defs.resolve_asset_graph().asset_check_keys
    assert dg.AssetCheckKey(dg.AssetKey("property_objects"), "import_not_stuck") in checks
    assert sum(1 for c in checks if c.name == "no_quarantined_items") == 6
    fields = talent_config.TalentImportConfig.model_fields
    assert set(fields) == {"mode", "page_size", "project_id_filter", "dry_run", "workers", "processes"}
    assert talent_config.TalentImportConfig().mode == "ApiPull"
    # the launchpad: mode is an enum, every field is described and has its default
    schema = job.run_config_schema.config_type.fields["resources"].config_type.fields["talent_import"]
    config_fields = schema.config_type.fields["config"].config_type.fields
    assert sorted(config_fields["mode"].config_type.config_values) == ["ApiPull", "TopicReplay"]
    assert all(field.description for field in config_fields.values())
    assert config_fields["workers"].default_value == 2 and config_fields["dry_run"].default_value is False


def test_the_full_bootstrap_job_takes_the_request_without_the_project_filter():
    from pin_chessboard_pipelines.defs.talent_import import launch

    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources={"chessboard": ChessboardResource()}))
    job = defs.resolve_job_def("talent_full_bootstrap")
    op_config = job.run_config_schema.config_type.fields["ops"].config_type.fields["launch_full_bootstrap"]
    fields = op_config.config_type.fields["config"].config_type.fields
    assert set(fields) == {"mode", "page_size", "dry_run", "workers", "processes"}
    assert all(field.description for field in fields.values())
    config = talent_config.FullBootstrapConfig(mode="TopicReplay", page_size=7)
    assert launch.import_run_config(config) == {
        "resources": {
            "talent_import": {
                "config": {
                    "mode": "TopicReplay",
                    "page_size": 7,
                    "dry_run": False,
                    "workers": 2,
                    "processes": 1,
                }
            }
        }
    }
    tags = launch.import_run_tags({"pin/import": "talent_initial_import"}, ["a-1", "b-2", "c-3"], "run-9")
    assert tags == {
        "pin/import": "talent_initial_import",
        "dagster/asset_partition_range_start": "a-1",
        "dagster/asset_partition_range_end": "c-3",
        "pin/trigger": "talent_full_bootstrap",
        "pin/launched-by": "run-9",
    }


def _bootstrap_failure(monkeypatch, **env: str) -> str:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    resources = {"chessboard": ChessboardResource(database_url="postgresql://pin@127.0.0.1:1/none")}
    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources=resources))
    result = defs.resolve_job_def("talent_full_bootstrap").execute_in_process(raise_on_error=False)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    return failure.step_failure_data.user_failure_data.description


def test_the_full_bootstrap_refuses_in_one_line_when_the_flag_is_off(monkeypatch):
    line = _bootstrap_failure(monkeypatch, CHESSBOARD_TALENT_SYNC_ENABLED="false")
    assert line.startswith("CHESSBOARD_IMPORT_DISABLED: ") and "\n" not in line


def test_the_full_bootstrap_names_an_unreachable_source(monkeypatch):
    line = _bootstrap_failure(
        monkeypatch,
        TALENT_API_URL="http://127.0.0.1:1",
        TALENT_API_TIMEOUT_SECONDS="1",
        CHESSBOARD_TALENT_SYNC_ENABLED="true",
    )
    assert line.startswith("listing the developers (ApiPull): ") and "\n" not in line


def test_a_project_filter_runs_on_its_own_developers_partition_alone():
    project, owner, other = (str(uuid.UUID(int=n)) for n in (1, 2, 3))
    mine, theirs = f"gk-alfa-{owner}", f"gk-beta-{other}"
    assert mixed_filters_refusal(project, [mine], None) is None  # one partition: look the owner up
    assert mixed_filters_refusal(project, [mine], [owner.upper()]) is None
    wrong = mixed_filters_refusal(project, [theirs], [owner])
    assert wrong and "mutually exclusive" in wrong and f"belongs to developer {owner}" in wrong
    assert theirs in wrong
    assert "is not listed by Talent" in (mixed_filters_refusal(project, [mine], []) or "")
    several = mixed_filters_refusal(project, [mine, theirs], None)
    assert several and "selects 2 partitions" in several

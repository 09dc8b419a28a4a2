"""The code location's pools: which steps use them, and their limits on a fresh instance."""

from __future__ import annotations

import dagster as dg

from pin_chessboard_pipelines.defs.analytics.definitions import project_inventory_daily
from pin_chessboard_pipelines.defs.pools import ensure_pools

ONE_RUN_EACH = {"concurrency": {"pools": {"granularity": "run", "default_limit": 1}}}


def test_the_inventory_runs_one_day_at_a_time():
    # "Materialize all" on the talent_import group backfills every day of it: one run per day
    assert {op.pool for op in project_inventory_daily.node_def.iterate_op_defs()} == {"project_inventory"}


def test_a_fresh_instance_knows_both_pools_with_one_run_each_and_a_second_call_keeps_them():
    with dg.instance_for_test(overrides=ONE_RUN_EACH) as instance:
        storage = instance.event_log_storage
        assert storage.get_concurrency_keys() == set()
        ensure_pools(instance)
        assert storage.get_concurrency_keys() == {"talent_import", "project_inventory"}
        assert {
            storage.get_concurrency_info(k).slot_count for k in ("talent_import", "project_inventory")
        } == {1}
        instance.event_log_storage.set_concurrency_slots("project_inventory", 3)  # an operator's change
        ensure_pools(instance)
        assert storage.get_concurrency_info("project_inventory").slot_count == 3

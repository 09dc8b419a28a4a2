"""The code location's pools (dagster.yaml `concurrency.pools`: granularity run, one run at a time).

- `talent_import`: one import at a time on every path (docs/talent-initial-import.md#advisory-lock).
- `project_inventory`: one `project_inventory_daily` run at a time. "Materialize all" on the
  talent_import group also takes that asset (the group's page shows it as the downstream neighbour
  of property_objects) and backfills every day of it: the pool keeps those runs from filling
  `max_concurrent_runs`, so the queue goes on starting the import and the sensors' runs beside them.

The run queue only holds runs back on pools the instance already knows: `ensure_pools` gives each
its default limit before a run needs it (the daemon's first sensor tick, the CLI's import).
"""

import dagster as dg

IMPORT_POOL = "talent_import"
INVENTORY_POOL = "project_inventory"
POOLS = (IMPORT_POOL, INVENTORY_POOL)


def ensure_pools(instance: dg.DagsterInstance) -> None:
    """Sets each pool's limit to dagster.yaml's default_limit if the instance does not know it yet."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return
    known = storage.get_concurrency_keys()
    for pool in POOLS:
        if pool in known:
            continue
        try:
            storage.initialize_concurrency_limit_to_default(pool)
        except Exception:  # noqa: BLE001 - Dagster raises no type of its own for a pool set already
            if pool not in storage.get_concurrency_keys():  # not another process setting it first
                raise

"""The daily inventory history analysts read: `project_inventory_daily`
(docs/store.md#analytics), its drift gate, its freshness policy and the schedule that runs it.

Thin shell: the read and the write are analytics/store.py's, the numbers analytics/inventory.py's.
"""

import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import dagster as dg

from pin_chessboard_pipelines.analytics.inventory import (
    TABLE_COLUMNS,
    DaySource,
    DayTotals,
    day_source,
    day_totals,
    free_prices,
    project_inventory,
    recorded_rows,
    recorded_totals,
    top_projects_markdown,
)
from pin_chessboard_pipelines.analytics.store import (
    drift,
    read_inventory_day,
    read_inventory_input,
    recorded_at,
)
from pin_chessboard_pipelines.defs.analytics.io_manager import DailyTableIOManager
from pin_chessboard_pipelines.defs.declare import utc_schedule
from pin_chessboard_pipelines.defs.metadata import (
    COLUMN_SCHEMA_KEY,
    OWNERS_BY_GROUP,
    TABLE_NAME_KEY,
    TOP_PROJECTS,
    column_schema,
    table_name,
)
from pin_chessboard_pipelines.defs.pools import INVENTORY_POOL
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.errors import AGGREGATES_DRIFT, PastDayRefused
from pin_chessboard_pipelines.store.tables import project_inventory_daily as INVENTORY_TABLE

ASSET_NAME = "project_inventory_daily"
ASSET_KEY = dg.AssetKey(ASSET_NAME)
GROUP = "analytics"
IO_MANAGER_KEY = "analytics_io_manager"
PARTITIONS = dg.DailyPartitionsDefinition(start_date="2026-11-01", end_offset=1)  # today included
DRIFT_CHECK = "aggregates_without_drift"
# evaluated by Dagster's freshness daemon: warns after one missed 23:50 run, fails after two
WARN_HOURS = 26
FAIL_HOURS = WARN_HOURS + 24
FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=FAIL_HOURS), warn_window=timedelta(hours=WARN_HOURS)
)
JOB_NAME = "project_inventory_daily_job"
SCHEDULE_NAME = "project_inventory_daily_schedule"


DESCRIPTION = """Daily inventory history per live, non-archived project: objects by status, free and
total counts, min / max / median free price, free inventory value and layouts by rooms, in
`chessboard_analytics.project_inventory_daily` (one row per project and day; a day materialized
again replaces that day's rows). Each partition is the replica's state when it was computed
(`computed_at`, `as_of`); the schedule takes it at 23:50 UTC. Partition-pure: a day is computed
from the replica only while it lasts (a day with no rows also by a late tick within the hour after);
once ended, a materialization of it keeps the
rows recorded on it (`as_of_source` history), and a past day with none is refused. Plots over days:
`free_objects`, `free_value`, `median_free_price`. Refuses to run while the recalc audit reports
drift. One run at a time (pool `project_inventory`)."""


def utc_now() -> datetime:
    """The asset's clock: which day the replica's current state is (tests set it)."""
    return datetime.now(UTC)


def _day_metadata(
    totals: DayTotals, computed_at: datetime, markdown: str | None, source: DaySource
) -> dict[str, dg.MetadataValue]:
    metadata: dict[str, dg.MetadataValue] = {
        "dagster/row_count": dg.MetadataValue.int(totals.projects),
        COLUMN_SCHEMA_KEY: dg.MetadataValue.table_schema(column_schema(INVENTORY_TABLE)),
        "projects": dg.MetadataValue.int(totals.projects),
        "free_objects": dg.MetadataValue.int(totals.free_objects),
        "total_objects": dg.MetadataValue.int(totals.total_objects),
        "free_value": dg.MetadataValue.float(float(totals.free_value)),
        "free_value_exact": dg.MetadataValue.text(f"{totals.free_value:f}"),
        "computed_at": dg.MetadataValue.timestamp(computed_at),
        "as_of": dg.MetadataValue.timestamp(computed_at),
        "as_of_source": dg.MetadataValue.text(source.value),
    }
    if markdown is not None:
        metadata["top_projects"] = dg.MetadataValue.md(markdown)
    if totals.median_free_price is not None:
        metadata["median_free_price"] = dg.MetadataValue.float(float(totals.median_free_price))
    return metadata


def _drift_result(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    with chessboard.engine.connect() as conn:
        divergences = drift(conn)
    projects = sorted({str(d.project_id) for d in divergences})
    return dg.AssetCheckResult(
        check_name=DRIFT_CHECK,
        passed=not divergences,
        severity=dg.AssetCheckSeverity.ERROR,
        description=None
        if not divergences
        else (
            f"{AGGREGATES_DRIFT}: {len(divergences)} stored aggregate(s) of {len(projects)} project(s) "
            "differ from their formulas with no pending recalc; fix the drift (runbook: recalc request) first"
        ),
        metadata={
            "divergences": dg.MetadataValue.int(len(divergences)),
            "projects_with_drift": dg.MetadataValue.int(len(projects)),
            "sample": dg.MetadataValue.json([d.as_dict() for d in divergences[:20]]),
        },
    )


@dg.asset(
    name=ASSET_NAME,
    group_name=GROUP,
    description=DESCRIPTION,
    partitions_def=PARTITIONS,
    deps=[
        dg.AssetDep("chessboard_aggregates"),
        dg.AssetDep("property_objects", partition_mapping=dg.AllPartitionMapping()),
    ],
    io_manager_key=IO_MANAGER_KEY,
    pool=INVENTORY_POOL,  # a backfill of days runs them one at a time (defs/pools.py)
    freshness_policy=FRESHNESS,
    kinds={"pandas", "postgres"},
    owners=list(OWNERS_BY_GROUP[GROUP]),
    tags={"domain": GROUP},
    metadata={
        TABLE_NAME_KEY: table_name(INVENTORY_TABLE),
        COLUMN_SCHEMA_KEY: column_schema(INVENTORY_TABLE),
        "partition_expr": "day",
    },
    check_specs=[
        dg.AssetCheckSpec(
            DRIFT_CHECK,
            asset=ASSET_NAME,
            blocking=True,
            description=(
                "The recalc audit finds no drift (a divergence without a pending recalc row): "
                "otherwise the asset refuses to run"
            ),
        )
    ],
)
def project_inventory_daily(
    context: dg.AssetExecutionContext, chessboard: ChessboardResource
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    gate = _drift_result(chessboard)
    yield gate
    if not gate.passed:
        raise dg.Failure(description=gate.description, metadata=gate.metadata)
    day = date.fromisoformat(context.partition_key)
    with chessboard.engine.connect() as conn:
        try:
            source = day_source(day, utc_now(), recorded_at(conn, day))
        except PastDayRefused as refused:
            raise dg.Failure(description=str(refused)) from None
        if source is DaySource.HISTORY:
            recorded = read_inventory_day(conn, day)
    if source is DaySource.HISTORY:  # the rows recorded on that day, written again as they are
        as_of = max(recorded["computed_at"]).astimezone(UTC)
        context.log.info(f"inventory {day}: past, {len(recorded)} row(s) recorded on it, as of {as_of}")
        yield dg.Output(
            recorded_rows(recorded).loc[:, list(TABLE_COLUMNS)],
            metadata=_day_metadata(recorded_totals(recorded), as_of, None, source),
        )
        return
    started = time.perf_counter()
    with chessboard.engine.connect() as conn:
        rows = read_inventory_input(conn)
    computed_at = utc_now()
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    prices = free_prices(rows.objects)
    frame = project_inventory(
        rows.projects, rows.objects, rows.layouts, day=day, computed_at=computed_at, prices=prices
    )
    totals = day_totals(frame, prices)
    markdown = top_projects_markdown(frame, TOP_PROJECTS)
    compute_seconds = time.perf_counter() - started
    context.log.info(
        f"inventory {day}: {totals.projects} projects, {totals.free_objects} free objects; "
        f"read {read_seconds:.2f}s, pandas {compute_seconds:.2f}s"
    )
    yield dg.Output(
        frame.loc[:, list(TABLE_COLUMNS)],
        metadata={
            **_day_metadata(totals, computed_at, markdown, source),
            # JSON, not numbers: the metadata's Plots view draws every numeric entry, and these are no inventory series
            "run_figures": dg.MetadataValue.json(
                {
                    "read_seconds": round(read_seconds, 3),
                    "compute_seconds": round(compute_seconds, 3),
                    "read_megabytes": round(rows.read_bytes / 1e6, 2),
                }
            ),
        },
    )


project_inventory_daily_job = dg.define_asset_job(
    JOB_NAME,
    selection=dg.AssetSelection.assets(ASSET_KEY),
    description="Materializes one day of project_inventory_daily (with its drift gate).",
)


def _inventory_run(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = context.scheduled_execution_time.astimezone(UTC).date().isoformat()
    return dg.RunRequest(run_key=f"inventory:{day}", partition_key=day)


project_inventory_daily_schedule = utc_schedule(
    SCHEDULE_NAME,
    project_inventory_daily_job,
    "50 23 * * *",
    "Every day at 23:50 UTC: today's partition, the replica's state at the end of the day.",
    execution_fn=_inventory_run,
)


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[project_inventory_daily],
        jobs=[project_inventory_daily_job],
        schedules=[project_inventory_daily_schedule],
        resources={IO_MANAGER_KEY: DailyTableIOManager(chessboard=ChessboardResource())},
    )

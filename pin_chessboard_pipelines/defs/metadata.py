"""Asset metadata standards, applied once to every asset of the definitions (definitions.py):
owners, tags, kinds, a description, the table and its column schema (derived from the SQLAlchemy
tables of store/tables.py, with a description per column), what each materialization metadata key
means, and links to the code.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import dagster as dg
from sqlalchemy import Table
from sqlalchemy.dialects import postgresql

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.recalc.runbook import OLDEST_ROWS
from pin_chessboard_pipelines.store import tables

TOP_PROJECTS = 10  # the inventory's top_projects table (defs/analytics)

OWNER = "team:pin-chessboard"
OWNERS_BY_GROUP: Mapping[str, tuple[str, ...]] = {
    "analytics": (OWNER, "team:pin-analytics"),
}
SYSTEM_TAG = {"system": "pin-chessboard"}
DEFAULT_KIND = "postgres"
TABLE_NAME_KEY = "dagster/table_name"
COLUMN_SCHEMA_KEY = "dagster/column_schema"
METADATA_KEYS_KEY = "metadata_keys"  # definition metadata: what each materialization metadata key means

# The table an asset is, by asset key (chessboard_aggregates spans four tables: no single schema).
ASSET_TABLES: Mapping[str, Table] = {
    **{e.asset: tables.REPLICA_BY_ENTITY[e.name] for e in ENTITIES},
    "pin_chessboard_events": tables.outbox_messages,
    "project_inventory_daily": tables.project_inventory_daily,
}

# Column descriptions (docs/store.md); a (table, column) entry wins over the column's name.
COLUMN_DESCRIPTIONS: Mapping[str, str] = {
    "id": "PIN id (a deterministic function of the Talent id)",
    "external_talent_id": "Talent id",
    "sync_source": "origin of the row: TalentChessboard for replicas",
    "replica_version": "last applied Talent version",
    "last_synced_at": "when the last Talent snapshot was applied",
    "version": "PIN domain version: 1 on create, +1 on every published change",
    "created_at": "row created",
    "updated_at": "row last changed",
    "deleted_at": "soft delete: NULL = alive",
    "tenant_id": "tenant (= the developer's PIN id)",
    "developer_id": "developer (PIN id)",
    "project_id": "project (PIN id)",
    "building_id": "building (PIN id)",
    "layout_group_id": "layout group (PIN id); NULL when the layout has none",
    "layout_id": "layout (PIN id); NULL when the object has none",
    "name": "display name",
    "inn": "taxpayer number of the developer",
    "status": "status (string enum)",
    "type": "project type (ResidentialComplex, ApartHotel, Hotel, Villa)",
    "class": "project class",
    "construction_status": "construction status",
    "country_id": "handbook country id",
    "region_id": "handbook region id",
    "city_id": "handbook city id",
    "stars": "hotel stars",
    "hotelier_id": "hotel operator",
    "currency_id": "handbook currency id of the prices",
    "payback_years": "payback period, years",
    "cover_image_file_id": "cover image file",
    "price_min": "aggregate: min price of free objects (NULL when none)",
    "price_max": "aggregate: max price of free objects (NULL when none)",
    "property_objects_total_count": "aggregate: active objects (live, not Hidden)",
    "property_objects_free_count": "aggregate: free objects (live, Free)",
    "floors_count": "floors of the building",
    "rooms": "rooms (0 = studio)",
    "layouts_count": "aggregate: live layouts of the group",
    "area_min": "aggregate: min total_area of the group's live layouts",
    "area_max": "aggregate: max total_area of the group's live layouts",
    "total_area": "total area, m²",
    "property_objects_count": "aggregate: active objects of the layout",
    "number": "object number, unique among live objects of a building",
    "floor": "floor",
    "section": "section",
    "status_source": "who set the status: TalentSync for replicated statuses",
    "price": "price in the project's currency (numeric, exact)",
    "message_id": "unique message id (the consumers' dedupe key)",
    "topic": "Kafka topic",
    "message_key": "Kafka key: the aggregate's PIN id",
    "payload": "event value (JSON)",
    "headers": "Kafka headers (JSON)",
    "occurred_at": "when the change happened",
    "published_at": "when the broker acknowledged it; NULL = pending",
    "day": "partition day (UTC)",
    "free_count": "free objects: live, status Free",
    "total_count": "active objects: live, status not Hidden",
    "sold_count": "live objects with status Sold",
    "reserved_count": "live objects with status Reserved",
    "booked_count": "live objects with status Booked",
    "hidden_count": "live objects with status Hidden",
    "price_median": "median price of free objects (exact; NULL when none)",
    "free_value": "sum of free objects' prices (0 when none)",
    "layouts_by_rooms": 'live layouts by rooms, {"rooms": layouts}',
    "computed_at": "when the partition was computed: the replica's state at that time",
}
TABLE_COLUMN_DESCRIPTIONS: Mapping[tuple[str, str], str] = {
    ("developers", "status"): "Draft on create",
    ("projects", "status"): "Draft / Published / Hidden / Archived (Draft on create)",
    ("projects", "tenant_id"): "tenant (= developer id)",
    ("buildings", "status"): "Draft on create",
    ("buildings", "property_objects_total_count"): "aggregate: active objects of the building",
    ("buildings", "property_objects_free_count"): "aggregate: free objects of the building",
    ("property_objects", "status"): "Free / Reserved / Booked / Sold / Hidden",
    ("outbox_messages", "id"): "commit order",
    ("project_inventory_daily", "project_id"): "live, non-archived project (PIN id)",
    ("project_inventory_daily", "price_min"): "min price of free objects (NULL when none)",
    ("project_inventory_daily", "price_max"): "max price of free objects (NULL when none)",
}

# planned / applied / skipped / failed of an import stage: what the counted items are
_IMPORT_COUNTERS: Mapping[str, str] = {
    "planned": "of the stage read from the source",
    "applied": "of the stage created or changed",
    "skipped": "of the stage skipped by the version guard (no-op)",
    "failed": "of the stage quarantined (talent_import_failed_items)",
}

# What each materialization / observation metadata key of a group's assets means: the one place
# these are described (the assets' pages show them as the `metadata_keys` table).
METADATA_KEY_DESCRIPTIONS: Mapping[str, Mapping[str, str]] = {
    # the stage assets, per developer partition: the partition's own figures first, then the
    # import run's (`import_`, every developer of it), then this Dagster run's own work (`run_`)
    "talent_import": {
        "developer_id": "the Talent id of the partition's developer",
        "developer_name": "the developer's name in the replica, as of this run (the partition key "
        "keeps the name the developer was first seen with)",
        **{key: f"this developer's items {text}" for key, text in _IMPORT_COUNTERS.items()},
        "planned": "this developer's items of the stage read from the source (an orphan, an item "
        "whose parent is not in the replica, counts under the developer whose listing it came from)",
        **{
            f"unattributed_{key}": f"items {text} that no developer partition counts (orphans of an "
            "unfiltered or project listing, whose developer nothing tells)"
            for key, text in _IMPORT_COUNTERS.items()
        },
        **{
            f"import_{key}": f"items {text} in the whole import run, every developer of it"
            for key, text in _IMPORT_COUNTERS.items()
        },
        "import_run_id": "talent_import_runs.id of the import run",
        "correlation_id": "CorrelationId: the first Dagster run of the import (re-executions resume it)",
        "import_status": "Running / Completed / Failed / Cancelled",
        "scopes": "the walks of the import: `all developers` or the filtered developers / project",
        "dry_run": "DryRun: the counters say what a real run would do, nothing was written",
        "import_pages": "pages of the stage in the whole import run, every developer of it",
        "run_pages_processed": "pages this Dagster run applied, every developer of it (the rest were "
        "Done in an earlier run of a resumed import); every partition of the run repeats it: no sum",
        "run_processes": "OS processes (pods) that claimed those pages",
        "run_duration_seconds": "this Dagster run's stage time, first claim to last Done (every "
        "partition of the run repeats it)",
        "run_items_processed": "items this Dagster run processed in the stage, every developer of it "
        "(every partition of the run repeats it: no sum)",
        "run_items_per_second": "run_items_processed per second of run_duration_seconds",
        "run_page_p99_ms": "p99 of this Dagster run's page times, claim to Done, ms",
    },
    "recalc": {
        "projects_recalculated": "projects whose aggregates were recomputed",
        "projects_failed": "projects whose transaction failed (row kept, retried)",
        "projects_skipped_archived": "archived or deleted projects dequeued untouched",
        "projects_poisoned": "rows that reached the poison AttemptCount",
        "coalesced_events": "requests coalesced into the drained rows",
        "buildings_changed": "buildings whose counters changed",
        "batches": "drain batches",
        "duration_seconds": "wall time of the drain",
        "projects_per_second": "drain rate",
        "stopped": "why the drain stopped (empty, time budget, cancelled)",
        "summary": "the drain result as JSON",
    },
    "outbox": {
        "published": "messages the broker acknowledged",
        "batches": "relay batches",
        "failed_attempts": "failed deliveries (rows kept pending)",
        "messages_per_second": "relay rate",
        "duration_seconds": "wall time of the relay",
        "purged": "published rows deleted past the retention",
        "backlog": "rows still pending",
        "oldest_pending_age_seconds": "age of the oldest pending row",
        "lock_busy": "another relay held the lock",
        "summary": "the relay result as JSON",
    },
}


# The same for assets whose keys are their own (they win over their group's).
ASSET_METADATA_KEY_DESCRIPTIONS: Mapping[str, Mapping[str, str]] = {
    "recalc_queue": {
        "read_at": "when the queue was read (UTC, the database's clock): every figure and row state is "
        "as of then; the status is recorded again when it changes (every 10 s at most)",
        "queue_depth": "rows in project_recalc_requests",
        "due": "rows whose DueAt has passed and that the drain takes now",
        "held": "rows held by a Running import run (they wait for its end)",
        "poison": "rows with AttemptCount >= CHESSBOARD_RECALC_POISON_ATTEMPTS, kept for RESET_POISON",
        "next_due_at": "the earliest DueAt of a row that is not poison (UTC)",
        "requested_events": "sum of RequestedCount over the queued rows (coalesced requests)",
        "oldest_rows": f"the {OLDEST_ROWS} rows with the earliest DueAt, due or not: project name, state "
        "(due, waiting, held, poison, as of read_at), DueAt, seconds to it from read_at, attempts and "
        "last error",
    },
    "project_inventory_daily": {
        "dagster/row_count": "rows written for the day: one per live, non-archived project",
        "dagster/column_schema": "the table's columns, types and meanings",
        "free_objects": "plot: free objects of every project that day",
        "free_value": "plot: sum of free objects' prices that day (float for the plot)",
        "free_value_exact": "the same sum with every stored digit",
        "median_free_price": "plot: median price of every free object that day (absent when none)",
        "total_objects": "active objects (live, not Hidden) that day",
        "projects": "live, non-archived projects that day",
        "top_projects": f"the {TOP_PROJECTS} projects with the most free inventory (by value)",
        "computed_at": "when the replica was read: a partition is the state at that time",
        "as_of": "as of when the numbers are: the replica's read (a day computed while it lasts), or "
        "the computed_at of the rows recorded on that day (a past day materialized again)",
        "as_of_source": "`replica` (computed now, the day is today) or `history` (a past day: the rows "
        "recorded on it, kept as they are; no median and no top projects)",
        "run_figures": "not a plot, the run's own cost: `read_seconds` (the one COPY read of the replica), "
        "`compute_seconds` (the pandas computation), `read_megabytes` (CSV bytes streamed from PostgreSQL)",
    },
}


def column_type(table: Table, column: str) -> str:
    return str(table.c[column].type.compile(dialect=postgresql.dialect())).lower()


def column_description(table: Table, column: str) -> str:
    """The (table, column) entry, the column's own `doc` (its declaration), or the column name's."""
    own = table.c[column].doc
    return TABLE_COLUMN_DESCRIPTIONS.get((table.name, column)) or own or COLUMN_DESCRIPTIONS[column]


def column_schema(table: Table) -> dg.TableSchema:
    """The table's columns with their PostgreSQL types, descriptions and constraints."""
    unique = {c.name for c in table.columns if c.unique}
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=c.name,
                type=column_type(table, c.name),
                description=column_description(table, c.name),
                constraints=dg.TableColumnConstraints(nullable=bool(c.nullable), unique=c.name in unique),
            )
            for c in table.columns
        ],
        constraints=dg.TableConstraints(
            other=[f"primary key ({', '.join(c.name for c in table.primary_key.columns)})"]
        ),
    )


def table_name(table: Table) -> str:
    return f"{table.schema}.{table.name}"


def metadata_keys_markdown(descriptions: Mapping[str, str]) -> dg.MetadataValue:
    rows = "\n".join(f"| `{key}` | {text} |" for key, text in descriptions.items())
    return dg.MetadataValue.md(f"| metadata key | meaning |\n|---|---|\n{rows}")


def standard_spec(spec: dg.AssetSpec) -> dg.AssetSpec:
    """One asset spec with the standards: existing values kept, missing ones filled in."""
    group = spec.group_name or "default"
    name = spec.key.to_user_string()
    owners = list(dict.fromkeys([*spec.owners, *OWNERS_BY_GROUP.get(group, (OWNER,))]))
    metadata: dict[str, object] = dict(spec.metadata)
    table = ASSET_TABLES.get(name)
    if table is not None:
        metadata.setdefault(TABLE_NAME_KEY, table_name(table))
        metadata.setdefault(COLUMN_SCHEMA_KEY, column_schema(table))
    keys = ASSET_METADATA_KEY_DESCRIPTIONS.get(name) or METADATA_KEY_DESCRIPTIONS.get(group)
    if keys and METADATA_KEYS_KEY not in metadata:
        metadata[METADATA_KEYS_KEY] = metadata_keys_markdown(keys)
    return spec.replace_attributes(
        description=spec.description or f"{name} ({group})",
        owners=owners,
        tags={**SYSTEM_TAG, "domain": group, **spec.tags},
        kinds=set(spec.kinds) or {DEFAULT_KIND},
        metadata=metadata,
    )


def with_metadata_standards(defs: dg.Definitions) -> dg.Definitions:
    """Every asset of `defs` with the standards and links to its code."""
    assets = dg.map_asset_specs(
        standard_spec, [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition | dg.AssetSpec)]
    )
    with warnings.catch_warnings():
        # beta in Dagster 1.13; the links are wanted all the same, and the definitions load warning-free
        warnings.simplefilter("ignore", dg.BetaWarning)
        linked = dg.with_source_code_references(assets)
    return dg.Definitions(assets=linked, **{part: getattr(defs, part) for part in _BESIDE_ASSETS})


# what with_metadata_standards keeps of the definitions as they are
_BESIDE_ASSETS = (
    "asset_checks",
    "jobs",
    "schedules",
    "sensors",
    "resources",
    "executor",
    "loggers",
    "metadata",
)

"""The chessboard store: every table of docs/store.md, in schema `chessboard`.

SQLAlchemy Core only (no ORM). Alembic migrations create exactly this; a test diffs the two.
Enum values are stored as strings (varchar), docs/store.md#replica-tables.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Date,
    DateTime,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Numeric,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.schema import SchemaItem

from pin_chessboard_pipelines.entities import (
    BUILDING,
    DEVELOPER,
    ENTITIES,
    LAYOUT,
    LAYOUT_GROUP,
    PROJECT,
    PROPERTY_OBJECT,
    SCHEMA,
    Entity,
    Role,
    column,
)
from pin_chessboard_pipelines.store.replica_upserts import RETURNS_BOOKKEEPING

ANALYTICS_SCHEMA = "chessboard_analytics"

metadata = MetaData(
    schema=SCHEMA,
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "ix": "ix_%(table_name)s_%(column_0_name)s",
    },
)


def _ts(name: str, nullable: bool = False, default: bool = True) -> Column:
    return Column(
        name, DateTime(timezone=True), nullable=nullable, server_default=func.now() if default else None
    )


def _replica_columns() -> list[Column]:
    """Columns every replica row has (docs/store.md#replica-tables), with their roles."""
    return [
        column("id", UUID(as_uuid=True), Role.ID, primary_key=True, nullable=False),
        column("external_talent_id", UUID(as_uuid=True), Role.TALENT_ID, nullable=False, unique=True),
        column("sync_source", String(32), Role.SOURCE, nullable=False, server_default="TalentChessboard"),
        column("replica_version", BigInteger, Role.REPLICA_VERSION, nullable=False),
        column("last_synced_at", DateTime(timezone=True), Role.SYNCED_AT),
        column("version", BigInteger, Role.VERSION, nullable=False, server_default="1"),
        column(
            "created_at", DateTime(timezone=True), Role.CREATED_AT, nullable=False, server_default=func.now()
        ),
        column(
            "updated_at", DateTime(timezone=True), Role.UPDATED_AT, nullable=False, server_default=func.now()
        ),
        column("deleted_at", DateTime(timezone=True), Role.SNAPSHOT),
    ]


def replica_table(entity: Entity, meta: MetaData = metadata) -> Table:
    """The replica table of an entity: the columns every replica row has, then its own
    (entities.py); the upsert is written from their roles (store/replica_upserts.py)."""
    return Table(entity.table, meta, *_replica_columns(), *entity.columns)


REPLICA_TABLES = tuple(replica_table(e) for e in ENTITIES)
REPLICA_BY_ENTITY: dict[str, Table] = {e.name: t for e, t in zip(ENTITIES, REPLICA_TABLES, strict=True)}
developers, projects, buildings, layout_groups, layouts, property_objects = (
    REPLICA_BY_ENTITY[e.name] for e in (DEVELOPER, PROJECT, BUILDING, LAYOUT_GROUP, LAYOUT, PROPERTY_OBJECT)
)
# A number is unique among the live objects of a building (docs/store.md#replica-tables).
Index(
    "uq_property_objects_live_number",
    property_objects.c.building_id,
    property_objects.c.number,
    unique=True,
    postgresql_where=text("deleted_at IS NULL"),
)
# the columns of the events and the recalc, no more: each returned column is parsed by the driver
property_objects.info[RETURNS_BOOKKEEPING] = False


# Handbook replica: reference data the project ships (docs/store.md#handbook-replica).
def _handbook_table(name: str, id_type: type[SmallInteger | BigInteger], *columns: Column) -> Table:
    """A handbook table: the handbook's own id (never generated here), then its columns."""
    return Table(name, metadata, Column("id", id_type, primary_key=True, autoincrement=False), *columns)


def _numbered_table(name: str, *columns: SchemaItem, **options: Any) -> Table:
    """A table whose rows the store numbers as they come (a generated bigint id), then its columns."""
    id_column = Column("id", BigInteger, primary_key=True, autoincrement=True)
    return Table(name, metadata, id_column, *columns, **options)


def _text(name: str, length: int) -> Column:
    return Column(name, String(length), nullable=False)


def _topic_version() -> Column:
    """The handbook topic's version of the row (pin.handbook.regions.v1, ...); 0 = seeded, never synced."""
    return Column("version", BigInteger, nullable=False, server_default="0")


handbook_countries = _handbook_table(
    "handbook_countries", SmallInteger, _text("name", 128), _text("iso_code", 3)
)
handbook_regions = _handbook_table(
    "handbook_regions",
    BigInteger,
    Column("country_id", SmallInteger, ForeignKey(f"{SCHEMA}.handbook_countries.id"), nullable=False),
    _text("name", 128),
    _topic_version(),
)
handbook_cities = _handbook_table(
    "handbook_cities",
    BigInteger,
    # no foreign key: the handbook service owns the reference; a city may arrive before its region
    Column("region_id", BigInteger, nullable=False),
    _text("name", 128),
    _topic_version(),
)
handbook_currencies = _handbook_table(
    "handbook_currencies", SmallInteger, _text("iso_code", 3), _text("name", 64), _text("sign", 8)
)

# handbook-sync's pending republishes (docs/store.md#handbook-sync): one row per renamed region or
# city whose live projects are not all republished yet; `after_project_id` is the keyset cursor of
# the batches (the last project id republished), NULL = from the start.
handbook_republish = Table(
    "handbook_republish",
    metadata,
    Column("kind", String(16), primary_key=True),  # region | city
    Column("handbook_id", BigInteger, primary_key=True, autoincrement=False),
    Column("handbook_version", BigInteger, nullable=False),
    Column("after_project_id", UUID(as_uuid=True)),
    Column("republished", Integer, nullable=False, server_default="0"),
    Column("batches", Integer, nullable=False, server_default="0"),
    _ts("requested_at"),
    _ts("updated_at"),
    CheckConstraint("kind IN ('region', 'city')", name="kind_known"),
)

# The republish of a renamed region / city walks its live projects by id (handbook_sync/).
Index(
    "ix_projects_region_live",
    projects.c.region_id,
    projects.c.id,
    postgresql_where=text("deleted_at IS NULL"),
)
Index("ix_projects_city_live", projects.c.city_id, projects.c.id, postgresql_where=text("deleted_at IS NULL"))

# Operational tables (docs/store.md#operational-tables).

# The talent_developers partition of each Talent developer, its key frozen at first sight (a rename
# in Talent keeps it; docs/talent-initial-import.md#partitions); `name` is the developer's latest.
developer_partitions = Table(
    "developer_partitions",
    metadata,
    Column("developer_id", UUID(as_uuid=True), primary_key=True),  # the Talent id
    Column("partition_key", Text, nullable=False, unique=True),
    Column("name", Text, nullable=False),
    _ts("first_seen_at"),
    _ts("renamed_at", nullable=True, default=False),
)

# Every process's metric samples (observability/samples.py), read by `metrics serve`: counters
# and histogram buckets summed over processes (owner ''), `max` gauges the greatest value, `live`
# gauges one row per live process (owner host:pid:token), ignored when not refreshed.
metric_samples = Table(
    "metric_samples",
    metadata,
    Column("kind", Text, primary_key=True),  # counter, histogram, gauge_max, gauge_livemax
    Column("key", Text, primary_key=True),  # prometheus_client's JSON of family, sample, labels, help
    Column("owner", Text, primary_key=True, server_default=text("''")),
    Column("value", Double, nullable=False),
    _ts("updated_at"),
)

project_recalc_requests = Table(
    "project_recalc_requests",
    metadata,
    Column("project_id", UUID(as_uuid=True), primary_key=True),
    Column("tenant_id", UUID(as_uuid=True), nullable=False),
    Column("due_at", DateTime(timezone=True), nullable=False),
    Column("first_requested_at", DateTime(timezone=True), nullable=False),
    Column("requested_count", Integer, nullable=False, server_default="1"),
    Column("last_reason", String(32), nullable=False),
    Column("attempt_count", Integer, nullable=False, server_default="0"),
    Column("last_error", String(1024)),
    _ts("created_at"),
    _ts("updated_at"),
    # the import run whose pages requested this recalc: held until that run finishes
    Column("import_run_id", UUID(as_uuid=True)),
    CheckConstraint("requested_count >= 1", name="requested_count_positive"),
    CheckConstraint("attempt_count >= 0", name="attempt_count_not_negative"),
    Index("ix_project_recalc_due", "due_at"),
    Index(
        "ix_project_recalc_import_run",
        "import_run_id",
        postgresql_where=text("import_run_id IS NOT NULL"),
    ),
)

talent_import_runs = Table(
    "talent_import_runs",
    metadata,
    Column("id", UUID(as_uuid=True), primary_key=True),
    Column("mode", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    _ts("started_at"),
    _ts("finished_at", nullable=True, default=False),
    Column("correlation_id", String(64), nullable=False),
    Column("dry_run", Boolean, nullable=False, server_default="false"),
    Column("developer_id_filter", UUID(as_uuid=True)),
    Column("project_id_filter", UUID(as_uuid=True)),
    Column("page_size", Integer, nullable=False),
    # Scope keys of the run: [""] = everything, developer ids, or "project:<id>" (talent_import/request.py).
    Column("scopes", JSONB, nullable=False, server_default=text("'[]'::jsonb")),
    # Per-stage counters {"Developers": {"planned":…, "applied":…, "skipped":…, "failed":…}, …},
    # summed from the pages when a stage completes (pages hold the live counters).
    Column("stage_counters", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("dagster_run_id", String(64)),
    Column("error", Text),
    # renewed by every live process of the run (its steps, the CLI that launched it): liveness
    Column("heartbeat_at", DateTime(timezone=True)),
    # its process holds the import lock for the whole run (the CLI): no holder of the lock, no run
    Column("lock_held", Boolean, nullable=False, server_default="false"),
    # renewed by the run worker of its Dagster run (the process that executes the run, not its
    # steps): once set, the run is alive while this is fresh (docs/talent-initial-import.md#pages-and-leases)
    Column("worker_heartbeat_at", DateTime(timezone=True)),
    Index("ix_talent_import_runs_status", "status"),
)

talent_import_pages = _numbered_table(
    "talent_import_pages",
    Column("run_id", UUID(as_uuid=True), ForeignKey(f"{SCHEMA}.talent_import_runs.id"), nullable=False),
    Column("stage", String(16), nullable=False),
    Column("page_no", Integer, nullable=False),
    Column("cursor", Text),
    Column("next_cursor", Text),  # where the walk goes on after this page
    Column(
        "is_last", Boolean, nullable=False, server_default="false"
    ),  # the walk of (stage, scope) ends here
    Column("scope", String(64), nullable=False, server_default=""),  # partition key (developer) or ""
    Column("status", String(16), nullable=False),
    Column("lease_until", DateTime(timezone=True)),
    Column("claim_token", UUID(as_uuid=True)),  # fencing token of the current claim
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("items_planned", Integer, nullable=False, server_default="0"),
    Column("items_applied", Integer, nullable=False, server_default="0"),
    Column("items_skipped", Integer, nullable=False, server_default="0"),
    Column("items_failed", Integer, nullable=False, server_default="0"),
    # developer PIN id ("" unknown) -> [applied, skipped, failed] of the page's items
    Column("tenant_counters", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("last_error", String(1024)),
    _ts("updated_at"),
    Column("claimed_by", Text),  # <host>:<pid> of the process that claimed the page last (kept after Done)
    Column("claimed_at", DateTime(timezone=True)),  # when it was claimed last
    # the process that walked it (read its items; another claimant reads them again by cursor)
    Column("planned_by", Text),
    # where the claimant that applied it took the items: walk (the walker's process), staged
    # (talent_import_staged_pages), source (read again by cursor)
    Column("items_read_from", String(8)),
    Column("heartbeat_at", DateTime(timezone=True)),  # renewed while the page is worked on
    Column("finished_at", DateTime(timezone=True)),  # when the page became Done or Failed
    UniqueConstraint("run_id", "stage", "scope", "page_no", name="uq_talent_import_pages_page"),
    Index("ix_talent_import_pages_claim", "run_id", "stage", "status", "page_no"),
)

# The items the walker read of a page, as one JSON array, until the page is Done or the run ends:
# a claimant in another process applies them instead of reading the page from Talent again
# (docs/talent-initial-import.md#pages-read-once). UNLOGGED: lost in a crash, the claimant then
# reads the page by its cursor; `items` stored uncompressed (migration 0012).
talent_import_staged_pages = Table(
    "talent_import_staged_pages",
    metadata,
    Column("run_id", UUID(as_uuid=True), primary_key=True),
    Column("stage", String(16), primary_key=True),
    Column(
        "page_id",
        BigInteger,
        ForeignKey(f"{SCHEMA}.talent_import_pages.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("items", Text, nullable=False),
    prefixes=["UNLOGGED"],
)

# What a DryRun "applied" in a stage (replica/context.py DryRunState), read by its later stages.
talent_import_dry_run_states = Table(
    "talent_import_dry_run_states",
    metadata,
    Column("run_id", UUID(as_uuid=True), ForeignKey(f"{SCHEMA}.talent_import_runs.id"), primary_key=True),
    Column("stage", String(16), primary_key=True),
    Column("state", JSONB, nullable=False),
)

talent_import_failed_items = _numbered_table(
    "talent_import_failed_items",
    Column("run_id", UUID(as_uuid=True), nullable=False, index=True),
    Column("stage", String(16), nullable=False),
    Column("external_id", String(64)),
    Column("error_code", String(64), nullable=False),
    Column("error_message", String(1024)),
    Column("payload", JSONB),
    _ts("created_at"),
    # the Kafka message the item was read from (talent-sync, TopicReplay; NULL for ApiPull): one row
    # per run and message, however often a batch is read again (docs/talent-source.md#poison-items)
    Column("source_topic", String(255)),
    Column("source_partition", Integer),
    Column("source_offset", BigInteger),
    Index(
        "uq_talent_import_failed_items_source",
        "run_id",
        "source_topic",
        "source_partition",
        "source_offset",
        unique=True,
    ),
)

# Deletes of the Talent topics (tombstones carry no version): the position of the last one per
# entity and Talent id. A snapshot read before it (a dead letter, a late replay) or from no topic
# (ApiPull) does not bring the entity back; one read after it re-creates it and the row goes
# (docs/talent-source.md#deletes).
talent_tombstones = Table(
    "talent_tombstones",
    metadata,
    Column("entity", String(16), primary_key=True),
    Column("external_talent_id", UUID(as_uuid=True), primary_key=True),
    Column("source_partition", Integer),
    Column("source_offset", BigInteger),
    _ts("deleted_at"),
)

outbox_messages = _numbered_table(
    "outbox_messages",
    Column("message_id", UUID(as_uuid=True), nullable=False, unique=True),
    Column("topic", String(255), nullable=False),
    Column("message_key", String(255), nullable=False),
    Column("payload", JSONB, nullable=False),
    Column("headers", JSONB, nullable=False),
    Column("occurred_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("published_at", DateTime(timezone=True)),
    # No btree names published_at, so the relay's mark is a HOT update on the row's page (migration
    # 0016; fillfactor 50 leaves it the room, migration 0011). The purge's index is a BRIN one, which
    # does not stop HOT; the relay finds pending rows from outbox_relay_floor up.
    Index("ix_outbox_messages_published_at_brin", "published_at", postgresql_using="brin"),
    postgresql_with={"fillfactor": 50},
)

# One row: every outbox row with an id below floor_id is published. The relay moves it up once no
# transaction that could still write an id up to horizon_id is running (docs/events.md#outbox-and-relay).
outbox_relay_floor = Table(
    "outbox_relay_floor",
    metadata,
    Column("id", SmallInteger, primary_key=True, autoincrement=False),
    Column("floor_id", BigInteger, nullable=False),
    Column("horizon_id", BigInteger, nullable=False),
    Column("horizon_xid", BigInteger, nullable=False),
    CheckConstraint("id = 1", name="ck_outbox_relay_floor_one_row"),
)

# Analytics (docs/store.md#analytics): one row per live, non-archived project and day.
project_inventory_daily = Table(
    "project_inventory_daily",
    metadata,
    Column("project_id", UUID(as_uuid=True), primary_key=True),
    Column("day", Date, primary_key=True),
    Column("tenant_id", UUID(as_uuid=True), nullable=False),
    Column("free_count", Numeric, nullable=False),
    Column("total_count", Numeric, nullable=False),
    Column("sold_count", Numeric, nullable=False),
    Column("reserved_count", Numeric, nullable=False),
    Column("booked_count", Numeric, nullable=False),
    Column("hidden_count", Numeric, nullable=False),
    Column("price_min", Numeric),
    Column("price_max", Numeric),
    Column("price_median", Numeric),
    Column("free_value", Numeric, nullable=False),
    # Extra column (the contract extends by adding): live layouts of the project by rooms, {"1": 4, ...}.
    Column("layouts_by_rooms", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("computed_at", DateTime(timezone=True), nullable=False),
    Index("ix_project_inventory_daily_day", "day"),
    schema=ANALYTICS_SCHEMA,
)

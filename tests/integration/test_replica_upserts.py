"""The upserts written from the entities' declarations, against a real PostgreSQL: each real
entity's runs on the migrated schema, and a seventh entity declared here (its own table) gets one
that creates, overwrites with a newer version and ignores an older one, as the six do."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import UUID

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import Role, column, draft_status, name_column, tenant
from pin_chessboard_pipelines.replica.columns import ReplicaEntity, replica_entity
from pin_chessboard_pipelines.store.cursor import Cursor, array_literal
from pin_chessboard_pipelines.store.tables import SCHEMA, replica_table

# A Talent entity the store does not have: its declaration is all the replica needs.
PARKING_SPOT = entities.declare(
    "parkingSpot",
    "ParkingSpots",
    "parking-spots",
    "ParkingSpot",
    "project",
    "project_id",
    "projectId",
    columns=(
        tenant(Role.CREATE_ONLY),
        column("project_id", UUID(as_uuid=True), Role.OWNER, nullable=False),  # no foreign key: alone here
        draft_status(Role.ARCHIVE),
        name_column(),
        column("level", sa.SmallInteger, Role.SNAPSHOT, nullable=False),
        column("price", sa.Numeric, Role.SNAPSHOT),
        column("price_source", sa.String(32), Role.STAMP, nullable=False, server_default="TalentSync"),
        column("free_count", sa.Integer, Role.PIN, nullable=False, server_default="0"),
    ),
)


def _upsert(engine, spec: ReplicaEntity, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One batch through the entity's upsert, as the apply path runs it (replica/database.py)."""
    arrays = {c: array_literal([row[c] for row in rows], c in spec.text_columns) for c in spec.upsert_columns}
    with engine.begin() as conn, Cursor(conn) as cur:
        cur.execute(spec.upsert.sql, spec.upsert.parameters(arrays))
        return {row["external_talent_id"]: row for row in cur.fetch_rows()}


def _stored(engine, table: str, talent_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        query = sa.text(f"SELECT * FROM {SCHEMA}.{table} WHERE external_talent_id = :id")
        return dict(conn.execute(query, {"id": talent_id}).mappings().one())


def test_a_seventh_entity_gets_its_upsert_from_its_declaration(engine):
    table = replica_table(PARKING_SPOT, sa.MetaData(schema=SCHEMA))
    with engine.begin() as conn:
        table.create(conn)
    spec = ReplicaEntity(PARKING_SPOT, table)
    assert spec.upsert_columns == (
        "id",
        "external_talent_id",
        "replica_version",
        "deleted_at",
        "tenant_id",
        "project_id",
        "name",
        "level",
        "price",
    )
    developer, project, other = (str(uuid.uuid4()) for _ in range(3))
    talent_ids = [str(uuid.uuid4()) for _ in range(2)]

    def snapshot(i: int, version: int, **changes: Any) -> dict[str, Any]:
        row = {
            "id": str(entities.pin_id("parkingSpot", talent_ids[i])),
            "external_talent_id": talent_ids[i],
            "replica_version": version,
            "deleted_at": None,
            "tenant_id": developer,
            "project_id": project,
            "name": f'P-"{i}"',
            "level": -1,
            "price": Decimal("12.50"),
        }
        return {**row, **changes}

    created = _upsert(engine, spec, [snapshot(0, 3), snapshot(1, 1)])
    assert {t: (r["inserted"], r["version"]) for t, r in created.items()} == {
        talent_ids[0]: (True, 1),
        talent_ids[1]: (True, 1),
    }
    first = _stored(engine, "parking_spots", talent_ids[0])
    assert (first["status"], first["price_source"], first["free_count"], first["sync_source"]) == (
        "Draft",
        "TalentSync",
        0,
        "TalentChessboard",
    )
    assert (first["name"], first["replica_version"], first["last_synced_at"] is not None) == (
        'P-"0"',
        3,
        True,
    )

    # a newer version with a change: overwritten, version + 1
    changed = _upsert(engine, spec, [snapshot(0, 4, price=Decimal("13"), level=2)])
    assert (changed[talent_ids[0]]["inserted"], changed[talent_ids[0]]["version"]) == (False, 2)
    row = _stored(engine, "parking_spots", talent_ids[0])
    assert (row["price"], row["level"], row["replica_version"], row["version"]) == (Decimal("13"), 2, 4, 2)
    assert row["updated_at"] >= first["updated_at"]

    # a newer version with the same fields: replica_version moves, version and updated_at stay
    same = _upsert(engine, spec, [snapshot(0, 5, price=Decimal("13.00"), level=2)])
    assert same[talent_ids[0]]["version"] == 2
    again = _stored(engine, "parking_spots", talent_ids[0])
    assert (again["replica_version"], again["version"], again["updated_at"]) == (5, 2, row["updated_at"])

    # an older version, and one naming another owner: ignored, nothing returned
    assert _upsert(engine, spec, [snapshot(0, 4, name="old"), snapshot(1, 2, project_id=other)]) == {}
    assert _stored(engine, "parking_spots", talent_ids[0])["name"] == 'P-"0"'
    assert _stored(engine, "parking_spots", talent_ids[1])["project_id"] == uuid.UUID(project)

    # the tenant is set on create only; PIN's own column is never written by a sync
    with engine.begin() as conn:
        conn.execute(sa.update(table).values(free_count=7, price_source="Crud"))
    moved = _upsert(engine, spec, [snapshot(1, 3, tenant_id=other)])
    assert moved[talent_ids[1]]["version"] == 2  # price_source back to TalentSync: a published change
    second = _stored(engine, "parking_spots", talent_ids[1])
    assert (second["tenant_id"], second["free_count"], second["price_source"]) == (
        uuid.UUID(developer),
        7,
        "TalentSync",
    )

    # a deleted snapshot archives it for good
    when = datetime(2026, 11, 1, 10, tzinfo=UTC)
    _upsert(engine, spec, [snapshot(1, 4, deleted_at=when)])
    assert _stored(engine, "parking_spots", talent_ids[1])["status"] == "Archived"
    _upsert(engine, spec, [snapshot(1, 5)])
    back = _stored(engine, "parking_spots", talent_ids[1])
    assert (back["deleted_at"], back["status"], back["version"]) == (None, "Archived", 4)


def test_the_upsert_of_each_entity_runs_on_the_migrated_schema(engine):
    """Parent to child, one row each: created, then a newer version with equal fields bumps
    nothing and the same version again is ignored."""
    talent = {e.name: str(uuid.uuid4()) for e in entities.ENTITIES}
    pin = {name: str(entities.pin_id(name, talent_id)) for name, talent_id in talent.items()}
    ids = {
        "tenant_id": pin["developer"],
        "developer_id": pin["developer"],
        "project_id": pin["project"],
        "building_id": pin["building"],
        "layout_group_id": pin["layoutGroup"],
        "layout_id": pin["layout"],
    }
    for entity in entities.ENTITIES:
        spec = replica_entity(entity.name)
        table = spec.table
        row: dict[str, Any] = {"id": pin[entity.name], "external_talent_id": talent[entity.name]}
        for name in spec.upsert_columns:
            if name in row:
                continue
            type_ = table.c[name].type
            row[name] = ids.get(name) or _value(name, type_)
        created = _upsert(engine, spec, [row])
        assert created[talent[entity.name]]["inserted"] is True, entity.name
        newer = _upsert(engine, spec, [{**row, "replica_version": 2}])
        assert (newer[talent[entity.name]]["inserted"], newer[talent[entity.name]]["version"]) == (False, 1)
        assert _upsert(engine, spec, [{**row, "replica_version": 2}]) == {}
        stored = _stored(engine, table.name, talent[entity.name])
        assert (stored["replica_version"], stored["version"]) == (2, 1), entity.name


def _value(name: str, type_: sa.types.TypeEngine) -> Any:
    if name == "replica_version":
        return 1
    if name == "deleted_at":
        return None
    if isinstance(type_, sa.String):
        return "Free" if name == "status" else f"{name} 1"
    if isinstance(type_, sa.Numeric):
        return Decimal("1.5")
    if isinstance(type_, sa.Integer):
        return 1
    raise AssertionError(f"no value for {name}")

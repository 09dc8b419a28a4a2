"""Each replica table is its entity's declaration (entities.py): every column has a role, and the
upsert written from the roles takes, sets and guards exactly what the roles say."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import Role
from pin_chessboard_pipelines.events.payloads import (
    UPSERTED_PAYLOADS,
    declared_payload,
    property_object_upserted,
    upserted_payload,
)
from pin_chessboard_pipelines.replica.columns import REPLICA, replica_entity
from pin_chessboard_pipelines.store import tables
from pin_chessboard_pipelines.store.replica_upserts import PARAMETERS, replica_upsert, role

NAMES = [e.name for e in entities.ENTITIES]


@pytest.mark.parametrize("name", NAMES)
def test_every_column_of_a_replica_table_has_a_role(name):
    table = tables.REPLICA_BY_ENTITY[name]
    assert [c.name for c in table.c][-len(entities.BY_NAME[name].columns) :] == [
        c.name for c in entities.BY_NAME[name].columns
    ]
    assert all(isinstance(role(c), Role) for c in table.c)


def test_a_column_without_a_role_is_named():
    table = sa.Table("t", sa.MetaData(), sa.Column("x", sa.Integer))
    with pytest.raises(KeyError, match=r"t\.x has no replica role"):
        role(table.c.x)


def _set_list(sql: str) -> set[str]:
    update = sql.split("DO UPDATE SET", 1)[1].split(" WHERE ", 1)[0]
    return set(re.findall(r"(?:^|, )(\w+) = ", update))


@pytest.mark.parametrize("name", NAMES)
def test_the_upsert_takes_the_parameters_and_sets_only_the_replica_fields(name):
    spec, table = replica_entity(name), tables.REPLICA_BY_ENTITY[name]
    sql = spec.upsert.sql
    assert spec.upsert_columns == tuple(c.name for c in table.c if role(c) in PARAMETERS)
    assert all(f"%({c})s" in sql for c in spec.upsert_columns)
    by_role = {c.name: role(c) for c in table.c}
    never_set = {c for c, r in by_role.items() if r in (Role.PIN, Role.CREATE_ONLY, Role.OWNER, Role.ID)}
    assert never_set.isdisjoint(_set_list(sql))
    assert {"replica_version", "version", "updated_at", "last_synced_at", "deleted_at"} <= _set_list(sql)
    assert f"WHERE chessboard.{table.name}.replica_version < excluded.replica_version" in sql
    assert sql.endswith("AS inserted")


def test_the_roles_give_the_guards_and_the_returned_columns_of_today():
    projects = replica_entity("project").upsert.sql
    assert projects.split(" WHERE ")[-1].startswith(
        "chessboard.projects.replica_version < excluded.replica_version"
        " AND chessboard.projects.developer_id = excluded.developer_id RETURNING"
    )
    objects = replica_entity("propertyObject").upsert.sql
    returned = objects.split(" RETURNING ")[1]
    assert "status_source" in returned and "replica_version" not in returned and "created_at" not in returned
    assert "status_source = excluded.status_source" in objects  # Talent's status is TalentSync's again
    assert "chessboard.developers.created_at" in replica_entity("developer").upsert.sql  # t.*


def test_the_replica_column_lists_come_from_the_declarations():
    assert REPLICA["building"].upsert_columns == (
        "id",
        "external_talent_id",
        "replica_version",
        "deleted_at",
        "tenant_id",
        "project_id",
        "name",
        "floors_count",
    )
    assert REPLICA["propertyObject"].existing_columns == (
        "project_id",
        "tenant_id",
        "building_id",
        "layout_id",
        "number",
        "status",
        "status_source",
        "price",
    )
    assert REPLICA["developer"].existing_columns == ()
    assert REPLICA["project"].text_columns == {"name", "type", "class", "construction_status"}
    assert replica_upsert(tables.buildings) is replica_upsert(tables.buildings)  # compiled once


def test_an_entity_without_a_payload_builder_publishes_its_declared_columns():
    spot = entities.declare(
        "parkingSpot",
        "ParkingSpots",
        "parking-spots",
        "ParkingSpot",
        "project",
        "project_id",
        "projectId",
        columns=(
            entities.tenant(),
            entities.name_column(),
            entities.column("floor_level", sa.SmallInteger, Role.SNAPSHOT),
        ),
    )
    assert spot.table == "parking_spots" and spot.upserted_event == "pin.chessboard.parking-spot-upserted"
    row = {"id": uuid.UUID(int=1), "tenant_id": uuid.UUID(int=2), "name": "P1", "floor_level": -1}
    payload = declared_payload(spot)({**row, "deleted_at": None, "version": 3, "sync_source": "x"}, None)
    assert payload == {
        "id": str(uuid.UUID(int=1)),
        "tenantId": str(uuid.UUID(int=2)),
        "name": "P1",
        "floorLevel": -1,
        "deletedAt": None,
        "version": 3,
    }
    assert upserted_payload("building") is UPSERTED_PAYLOADS["building"]


def test_the_property_object_payload_written_out_is_its_declared_payload():
    row = {
        "id": uuid.UUID(int=1),
        "tenant_id": str(uuid.UUID(int=2)),
        "project_id": uuid.UUID(int=3),
        "building_id": uuid.UUID(int=4),
        "layout_id": None,
        "number": "12",
        "floor": -1,
        "section": None,
        "status": "Free",
        "status_source": "TalentSync",
        "price": Decimal("1000000.50"),
        "total_area": Decimal("45.5"),
        "deleted_at": datetime(2026, 12, 1, tzinfo=UTC),
        "version": 7,
    }
    written = property_object_upserted(row)
    declared = declared_payload(entities.PROPERTY_OBJECT)(row, None)
    assert written == declared and list(written) == list(declared)

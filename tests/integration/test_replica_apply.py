"""The replica apply path against a real PostgreSQL: rows, outbox events, quarantine, recalc requests."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from pin_chessboard_pipelines.errors import (
    SYNC_DUPLICATE_NUMBER,
    SYNC_PARENT_MISMATCH,
    SYNC_PARENT_NOT_FOUND,
    SYNC_STATUS_CONFLICT,
    SYNC_VALIDATION_FAILED,
)
from pin_chessboard_pipelines.events.outbox import OutboxEvent
from pin_chessboard_pipelines.observability.metrics import (
    IMPORT_FAILED_ITEMS,
    SYNC_UNKNOWN_ENUM,
    SYNC_UNRESOLVED_REFERENCE,
)
from pin_chessboard_pipelines.replica.apply import (
    STREAMING_RUN_ID,
    ApplyContext,
    ApplyResult,
    DryRunState,
    apply_snapshots,
    apply_tombstones,
)
from pin_chessboard_pipelines.replica.ids import pin_id
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.topics import STAGES

RUN_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")
ENTITY_TABLES = {
    "developer": "developers",
    "project": "projects",
    "building": "buildings",
    "layoutGroup": "layout_groups",
    "layout": "layouts",
    "propertyObject": "property_objects",
}
WRITTEN_TABLES = (
    *ENTITY_TABLES.values(),
    "talent_import_failed_items",
    "outbox_messages",
    "project_recalc_requests",
)


def tid() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def make_ctx(engine):
    with engine.connect() as conn:
        handbook = load_handbook(conn)

    def make(**overrides) -> ApplyContext:
        values = {
            "correlation_id": "corr-1",
            "handbook": handbook,
            "debounce_seconds": 30,
            "cap_seconds": 300,
            "run_id": RUN_ID,
        }
        values.update(overrides)
        return ApplyContext(**values)

    return make


def apply(engine, entity, items, ctx) -> ApplyResult:
    with engine.begin() as conn:
        return apply_snapshots(conn, entity, items, ctx)


def rows(engine, sql, **params) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def one(engine, sql, **params) -> dict:
    (row,) = rows(engine, sql, **params)
    return row


def counts(engine) -> dict[str, int]:
    return {t: one(engine, f"SELECT count(*) AS n FROM chessboard.{t}")["n"] for t in WRITTEN_TABLES}


def outbox(engine, topic_part: str = "") -> list[dict]:
    return rows(
        engine,
        "SELECT topic, message_key, payload, headers FROM chessboard.outbox_messages "
        "WHERE topic LIKE :t ORDER BY id",
        t=f"%{topic_part}%",
    )


class Tree:
    """A hand-built Talent hierarchy: one developer, project, building, layout group and layout."""

    def __init__(self) -> None:
        self.developer = {"id": tid(), "version": 1, "name": "ГК Север", "inn": "7701234567"}
        self.project = {
            "id": tid(),
            "developerId": self.developer["id"],
            "version": 3,
            "name": "ЖК Северный",
            "type": "ApartHotel",
            "class": "Business",
            "constructionStatus": "Commissioned",
            "countryId": 643,
            "regionId": 77,
            "cityId": 1,
            "stars": 4,
            "currencyId": 643,
            "paybackYears": "7.5",
            "unknownExtra": {"ignored": True},
        }
        self.building = {
            "id": tid(),
            "projectId": self.project["id"],
            "version": 2,
            "name": "Корпус 1",
            "floorsCount": 17,
        }
        self.group = {
            "id": tid(),
            "projectId": self.project["id"],
            "version": 1,
            "name": "Студии",
            "rooms": 0,
        }
        self.layout = {
            "id": tid(),
            "projectId": self.project["id"],
            "layoutGroupId": self.group["id"],
            "version": 1,
            "name": "Студия 24.5 м²",
            "rooms": 0,
            "totalArea": 24.5,
        }

    def obj(self, number: str, status: str = "Free", price: str | None = "5000000.50", **extra) -> dict:
        item = {
            "id": tid(),
            "buildingId": self.building["id"],
            "layoutId": self.layout["id"],
            "version": 1,
            "number": number,
            "floor": 3,
            "section": 1,
            "status": status,
            "price": price,
            "totalArea": "24.50",
        }
        item.update(extra)
        return item

    def apply_parents(self, engine, ctx, with_developer: bool = True) -> None:
        for entity, item in (
            ("developer", self.developer),
            ("project", self.project),
            ("building", self.building),
            ("layoutGroup", self.group),
            ("layout", self.layout),
        )[0 if with_developer else 1 :]:
            result = apply(engine, entity, [item], ctx)
            assert (result.applied, result.failed) == (1, 0), (entity, result)


def pid(entity: str, item: dict) -> uuid.UUID:
    return pin_id(entity, item["id"])


def test_create_path_rows_events_and_recalc(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    free, sold, no_price = tree.obj("1-3-1"), tree.obj("1-3-2", "Sold"), tree.obj("1-3-3", "Reserved", None)
    result = apply(engine, "propertyObject", [free, sold, no_price], ctx)
    assert (result.planned, result.applied, result.created, result.skipped, result.failed) == (3, 3, 3, 0, 0)

    developer_pin, project_pin = pid("developer", tree.developer), pid("project", tree.project)
    developer = one(engine, "SELECT * FROM chessboard.developers")
    assert developer["id"] == developer_pin
    assert developer["external_talent_id"] == uuid.UUID(tree.developer["id"])
    assert (developer["status"], developer["version"], developer["replica_version"]) == ("Draft", 1, 1)
    assert developer["sync_source"] == "TalentChessboard" and developer["last_synced_at"] is not None

    project = one(engine, "SELECT * FROM chessboard.projects")
    assert project["id"] == project_pin
    assert project["tenant_id"] == developer_pin and project["developer_id"] == developer_pin
    assert (project["status"], project["version"], project["replica_version"]) == ("Draft", 1, 3)
    assert project["payback_years"] == Decimal("7.5")
    assert (project["price_min"], project["price_max"]) == (None, None)
    assert (project["property_objects_total_count"], project["property_objects_free_count"]) == (0, 0)
    assert project["hotelier_id"] is None and project["cover_image_file_id"] is None

    building = one(engine, "SELECT * FROM chessboard.buildings")
    assert (building["status"], building["tenant_id"], building["project_id"]) == (
        "Draft",
        developer_pin,
        project_pin,
    )
    group = one(engine, "SELECT * FROM chessboard.layout_groups")
    assert (group["layouts_count"], group["area_min"], group["area_max"]) == (0, None, None)
    layout = one(engine, "SELECT * FROM chessboard.layouts")
    assert layout["layout_group_id"] == pid("layoutGroup", tree.group)
    assert (layout["total_area"], layout["property_objects_count"]) == (Decimal("24.5"), 0)

    objects = {
        r["number"]: r for r in rows(engine, "SELECT * FROM chessboard.property_objects ORDER BY number")
    }
    first = objects["1-3-1"]
    assert first["id"] == pid("propertyObject", free)
    assert (first["tenant_id"], first["project_id"], first["building_id"], first["layout_id"]) == (
        developer_pin,
        project_pin,
        pid("building", tree.building),
        pid("layout", tree.layout),
    )
    assert (first["status"], first["status_source"], first["price"], first["total_area"]) == (
        "Free",
        "TalentSync",
        Decimal("5000000.50"),
        Decimal("24.50"),
    )
    assert {r["sync_source"] for r in objects.values()} == {"TalentChessboard"}
    assert {r["version"] for r in objects.values()} == {1}

    # project-upserted: exactly the ProjectUpsertedKafkaEvent payload with handbook display snapshots
    (project_event,) = outbox(engine, "project-upserted")
    assert project_event["message_key"] == str(project_pin)
    assert project_event["payload"] == {
        "id": str(project_pin),
        "tenantId": str(developer_pin),
        "developerId": str(developer_pin),
        "status": "Draft",
        "name": "ЖК Северный",
        "type": "ApartHotel",
        "class": "Business",
        "constructionStatus": "Commissioned",
        "countryId": 643,
        "countrySnapshot": {"id": 643, "name": "Россия", "isoCode": "RUS"},
        "regionId": 77,
        "regionSnapshot": {"id": 77, "name": "Москва"},
        "cityId": 1,
        "citySnapshot": {"id": 1, "name": "Москва"},
        "stars": 4,
        "hotelierId": None,
        "price": None,
        "currencyId": 643,
        "currencySnapshot": {"id": 643, "isoCode": "RUB", "name": "Российский рубль", "sign": "₽"},
        "propertyObjectsTotalCount": 0,
        "propertyObjectsFreeCount": 0,
        "paybackYears": 7.5,
        "coverImageFileId": None,
        "version": 1,
    }
    headers = project_event["headers"]
    assert (headers["aggregateType"], headers["eventType"], headers["correlationId"]) == (
        "Project",
        "pin.chessboard.project-upserted",
        "corr-1",
    )
    topics = [e["topic"] for e in outbox(engine)]
    assert topics[:5] == [
        "pin.chessboard.developer-upserted.v1",
        "pin.chessboard.project-upserted.v1",
        "pin.chessboard.building-upserted.v1",
        "pin.chessboard.layout-group-upserted.v1",
        "pin.chessboard.layout-upserted.v1",
    ]
    assert len(outbox(engine, "property-object-upserted")) == 3
    # price-changed: the initial price point of objects that have a price
    prices = outbox(engine, "price-changed")
    assert [p["payload"] for p in prices] == [
        {
            "id": str(pid("propertyObject", o)),
            "projectId": str(project_pin),
            "oldPrice": None,
            "newPrice": float(Decimal(o["price"])),
            "source": "TalentSync",
            "version": 1,
        }
        for o in (free, sold)
    ]
    # status-changed: only the imported Sold
    (status,) = outbox(engine, "status-changed")
    assert status["payload"] == {
        "id": str(pid("propertyObject", sold)),
        "projectId": str(project_pin),
        "oldStatus": None,
        "newStatus": "Sold",
        "source": "TalentSync",
        "version": 1,
    }
    assert result.events == 3 + 2 + 1
    assert result.touched_projects == {(project_pin, developer_pin)}
    # one debounced request per touched project, coalescing every stage that touched it
    request = one(engine, "SELECT * FROM chessboard.project_recalc_requests")
    assert (request["project_id"], request["tenant_id"], request["last_reason"]) == (
        project_pin,
        developer_pin,
        "TalentSync",
    )
    assert request["requested_count"] == 5  # project, building, layout group, layout, objects


def test_outbox_rows_have_the_outbox_event_layout(engine, make_ctx):
    """The apply path COPYs its outbox rows: they must be what events/outbox.write_outbox writes."""
    ctx = make_ctx(correlation_id='corr "quoted" \\ back\tslash')
    tree = Tree()
    tree.apply_parents(engine, ctx)
    apply(engine, "propertyObject", [tree.obj("1-1-1", "Sold")], ctx)
    written = rows(engine, "SELECT * FROM chessboard.outbox_messages ORDER BY id")
    assert len(written) == 8
    assert len({r["message_id"] for r in written}) == 8
    for row in written:
        event_type = row["headers"]["eventType"]
        expected = OutboxEvent(
            event_type,
            row["message_key"],
            row["payload"],
            ctx.correlation_id,
            message_id=row["message_id"],
            occurred_at=row["occurred_at"],
        ).row()
        assert row["message_id"].version == 4
        assert {k: row[k] for k in expected if k != "headers"} == {
            k: v for k, v in expected.items() if k != "headers"
        }
        headers = dict(row["headers"])
        assert datetime.fromisoformat(headers.pop("occurredAt")) == row["occurred_at"]
        expected["headers"].pop("occurredAt")
        assert headers == expected["headers"]
        assert row["published_at"] is None


AWKWARD_TEXT = [
    'quote " inside',
    "back\\slash \\N",
    "{braces},comma",
    "NULL",
    "  spaced  ",
    "it's",
    "tab\there\nnewline",
    "эмодзи 🏠 и ё",
    "\u2028line separator",
]


def test_awkward_text_survives_the_array_literals_and_the_outbox_copy(engine, make_ctx):
    ctx = make_ctx()
    developers = [{"id": tid(), "version": 1, "name": name} for name in AWKWARD_TEXT]
    assert apply(engine, "developer", developers, ctx).applied == len(AWKWARD_TEXT)
    stored = {r["external_talent_id"]: r["name"] for r in rows(engine, "SELECT * FROM chessboard.developers")}
    assert stored == {uuid.UUID(d["id"]): d["name"] for d in developers}
    assert [e["payload"]["name"] for e in outbox(engine)] == AWKWARD_TEXT
    tree = Tree()
    tree.developer = developers[0]
    tree.project["developerId"] = developers[0]["id"]
    tree.apply_parents(engine, ctx, with_developer=False)
    numbers = ['1"2', "3\\4", "{5}", "NULL", "6,7"]
    assert apply(engine, "propertyObject", [tree.obj(n) for n in numbers], ctx).applied == len(numbers)
    assert sorted(
        r["number"] for r in rows(engine, "SELECT number FROM chessboard.property_objects")
    ) == sorted(numbers)


def test_reapply_same_batch_is_a_no_op(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    objects = [tree.obj(f"1-1-{n}") for n in range(5)]
    apply(engine, "propertyObject", objects, ctx)
    before = counts(engine)
    request_before = one(engine, "SELECT requested_count, due_at FROM chessboard.project_recalc_requests")
    for entity, item in (("developer", tree.developer), ("project", tree.project), ("layout", tree.layout)):
        result = apply(engine, entity, [item], ctx)
        assert (result.applied, result.skipped, result.events) == (0, 1, 0)
    result = apply(engine, "propertyObject", objects, ctx)
    assert (result.planned, result.applied, result.skipped, result.failed, result.events) == (5, 0, 5, 0, 0)
    assert result.touched_projects == set()
    assert counts(engine) == before
    assert one(engine, "SELECT requested_count, due_at FROM chessboard.project_recalc_requests") == (
        request_before
    )
    assert {r["version"] for r in rows(engine, "SELECT version FROM chessboard.property_objects")} == {1}


def test_newer_version_overwrites_replica_fields_only(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    hotelier, cover = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE chessboard.projects SET status = 'Published', hotelier_id = :h, "
                "cover_image_file_id = :c, price_min = 1, price_max = 2, property_objects_total_count = 7, "
                "property_objects_free_count = 3, version = version + 1"
            ),
            {"h": hotelier, "c": cover},
        )
        conn.execute(sa.text("UPDATE chessboard.buildings SET status = 'Published'"))
    created_at = one(engine, "SELECT created_at FROM chessboard.projects")["created_at"]
    newer = {**tree.project, "version": 4, "name": "ЖК Северный-2", "class": "Elite", "cityId": None}
    result = apply(engine, "project", [newer], ctx)
    assert (result.applied, result.created, result.skipped) == (1, 0, 0)
    project = one(engine, "SELECT * FROM chessboard.projects")
    assert (project["name"], project["class"], project["city_id"], project["replica_version"]) == (
        "ЖК Северный-2",
        "Elite",
        None,
        4,
    )
    assert project["version"] == 3  # 1 on create, +1 by the PIN-side change, +1 by this snapshot
    assert (project["status"], project["hotelier_id"], project["cover_image_file_id"]) == (
        "Published",
        hotelier,
        cover,
    )
    assert (project["price_min"], project["price_max"]) == (1, 2)
    assert (project["property_objects_total_count"], project["property_objects_free_count"]) == (7, 3)
    assert project["created_at"] == created_at and project["updated_at"] > created_at
    event = outbox(engine, "project-upserted")[-1]["payload"]
    assert (event["version"], event["status"], event["hotelierId"], event["citySnapshot"]) == (
        3,
        "Published",
        str(hotelier),
        None,
    )
    assert event["price"] == {"min": 1, "max": 2}

    building = {**tree.building, "version": 3, "floorsCount": 20}
    assert apply(engine, "building", [building], ctx).applied == 1
    row = one(engine, "SELECT status, floors_count, version FROM chessboard.buildings")
    assert row == {"status": "Published", "floors_count": 20, "version": 2}

    # an older or equal version is skipped, whatever it says
    stale = {**tree.project, "version": 4, "name": "stale"}
    assert apply(engine, "project", [stale], ctx).skipped == 1
    assert one(engine, "SELECT name FROM chessboard.projects")["name"] == "ЖК Северный-2"


def test_property_object_update_emits_price_and_status_changes(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    obj = tree.obj("1-1-1", "Free", "100")
    apply(engine, "propertyObject", [obj], ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.outbox_messages"))
    apply(engine, "propertyObject", [{**obj, "version": 2, "price": 120, "status": "Booked"}], ctx)
    by_topic = {e["topic"].split(".")[2]: e["payload"] for e in outbox(engine)}
    assert by_topic["property-object-price-changed"] == {
        "id": str(pid("propertyObject", obj)),
        "projectId": str(pid("project", tree.project)),
        "oldPrice": 100,
        "newPrice": 120,
        "source": "TalentSync",
        "version": 2,
    }
    assert by_topic["property-object-status-changed"]["oldStatus"] == "Free"
    assert by_topic["property-object-status-changed"]["newStatus"] == "Booked"
    # same price and status, newer version: only the upserted event
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.outbox_messages"))
    apply(
        engine,
        "propertyObject",
        [{**obj, "version": 3, "price": "120.00", "status": "Booked", "floor": 4}],
        ctx,
    )
    assert [e["topic"] for e in outbox(engine)] == ["pin.chessboard.property-object-upserted.v1"]


def test_missing_parent_is_quarantined_and_the_rest_applied(engine, make_ctx):
    ctx = make_ctx(stage="Buildings")
    tree = Tree()
    apply(engine, "developer", [tree.developer], ctx)
    apply(engine, "project", [tree.project], ctx)
    orphan = {**tree.building, "id": tid(), "projectId": tid()}
    result = apply(engine, "building", [orphan, tree.building], ctx)
    assert (result.applied, result.failed) == (1, 1)
    assert result.quarantined == [(orphan["id"], SYNC_PARENT_NOT_FOUND)]
    failed = one(engine, "SELECT * FROM chessboard.talent_import_failed_items")
    assert (failed["run_id"], failed["stage"], failed["external_id"], failed["error_code"]) == (
        RUN_ID,
        "Buildings",
        orphan["id"],
        SYNC_PARENT_NOT_FOUND,
    )
    assert failed["payload"] == orphan
    assert orphan["projectId"] in failed["error_message"]
    assert one(engine, "SELECT count(*) AS n FROM chessboard.buildings")["n"] == 1

    # a project whose developer is missing, a property object whose building is missing
    lost = {**tree.project, "id": tid(), "developerId": tid()}
    assert apply(engine, "project", [lost], ctx).quarantined == [(lost["id"], SYNC_PARENT_NOT_FOUND)]
    lonely = tree.obj("9-9-9", buildingId=tid())
    assert apply(engine, "propertyObject", [lonely], ctx).quarantined == [
        (lonely["id"], SYNC_PARENT_NOT_FOUND)
    ]


def test_layout_links_must_stay_in_one_project(engine, make_ctx):
    ctx = make_ctx()
    tree, other = Tree(), Tree()
    other.developer = tree.developer
    other.project["developerId"] = tree.developer["id"]
    tree.apply_parents(engine, ctx)
    other.apply_parents(engine, ctx, with_developer=False)
    foreign_group = {**tree.layout, "id": tid(), "layoutGroupId": other.group["id"]}
    missing_group = {**tree.layout, "id": tid(), "layoutGroupId": tid()}
    result = apply(engine, "layout", [foreign_group, missing_group], ctx)
    assert result.quarantined == [
        (foreign_group["id"], SYNC_PARENT_MISMATCH),
        (missing_group["id"], SYNC_PARENT_NOT_FOUND),
    ]
    foreign_layout = tree.obj("1-1-1", layoutId=other.layout["id"])
    no_layout = tree.obj("1-1-2", layoutId=None)
    result = apply(engine, "propertyObject", [foreign_layout, no_layout], ctx)
    assert result.quarantined == [(foreign_layout["id"], SYNC_PARENT_MISMATCH)]
    assert result.applied == 1


def test_children_of_a_soft_deleted_parent_are_applied(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.building["deletedAt"] = "2024-05-01T10:00:00Z"
    tree.apply_parents(engine, ctx)
    assert one(engine, "SELECT deleted_at FROM chessboard.buildings")["deleted_at"] == datetime(
        2024, 5, 1, 10, tzinfo=UTC
    )
    assert apply(engine, "propertyObject", [tree.obj("1-1-1")], ctx).applied == 1


def test_duplicate_numbers_within_a_batch_and_against_the_replica(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    a, b = tree.obj("1-1-1"), tree.obj("1-1-1")
    deleted_twin = tree.obj("1-1-1", deletedAt="2024-01-01T00:00:00Z")
    result = apply(engine, "propertyObject", [a, b, deleted_twin], ctx)
    assert (result.applied, result.failed) == (2, 1)
    assert result.quarantined == [(b["id"], SYNC_DUPLICATE_NUMBER)]
    # against a live row already in the replica (another external id)
    c = tree.obj("1-1-1")
    assert apply(engine, "propertyObject", [c], ctx).quarantined == [(c["id"], SYNC_DUPLICATE_NUMBER)]
    # the holder moves to another number in the same batch, before the newcomer: the number is free
    moved = {**a, "version": 2, "number": "1-1-9"}
    result = apply(engine, "propertyObject", [moved, c], ctx)
    assert (result.applied, result.failed) == (2, 0)
    # the holder is deleted by a later snapshot: its number is free again
    gone = {**c, "version": 2, "deletedAt": "2024-02-01T00:00:00Z"}
    d = tree.obj("1-1-1")
    assert apply(engine, "propertyObject", [gone, d], ctx).applied == 2
    live = rows(
        engine, "SELECT number FROM chessboard.property_objects WHERE deleted_at IS NULL ORDER BY number"
    )
    assert [r["number"] for r in live] == ["1-1-1", "1-1-9"]
    codes = [
        r["error_code"] for r in rows(engine, "SELECT error_code FROM chessboard.talent_import_failed_items")
    ]
    assert codes == [SYNC_DUPLICATE_NUMBER, SYNC_DUPLICATE_NUMBER]


def test_sold_over_a_pin_hold_is_a_status_conflict(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    held, talent_reserved = tree.obj("1-1-1"), tree.obj("1-1-2", "Reserved")
    apply(engine, "propertyObject", [held, talent_reserved], ctx)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE chessboard.property_objects SET status = 'Reserved', status_source = 'Crm' "
                "WHERE number = '1-1-1'"
            )
        )
    result = apply(
        engine,
        "propertyObject",
        [{**held, "version": 2, "status": "Sold"}, {**talent_reserved, "version": 2, "status": "Sold"}],
        ctx,
    )
    assert result.quarantined == [(held["id"], SYNC_STATUS_CONFLICT)]
    assert result.applied == 1
    statuses = {
        r["number"]: (r["status"], r["status_source"])
        for r in rows(engine, "SELECT number, status, status_source FROM chessboard.property_objects")
    }
    assert statuses == {"1-1-1": ("Reserved", "Crm"), "1-1-2": ("Sold", "TalentSync")}


def test_soft_delete_by_snapshot_and_by_tombstone(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    by_snapshot, by_tombstone = tree.obj("1-1-1"), tree.obj("1-1-2")
    apply(engine, "propertyObject", [by_snapshot, by_tombstone], ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.outbox_messages"))
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    deleted = {**by_snapshot, "version": 2, "deletedAt": "2024-03-01T12:00:00+03:00"}
    assert apply(engine, "propertyObject", [deleted], ctx).applied == 1
    row = one(engine, "SELECT deleted_at, version FROM chessboard.property_objects WHERE number = '1-1-1'")
    assert row == {"deleted_at": datetime(2024, 3, 1, 9, tzinfo=UTC), "version": 2}
    (event,) = outbox(engine, "property-object-upserted")
    assert event["payload"]["deletedAt"] is not None and event["payload"]["version"] == 2

    with engine.begin() as conn:
        result = apply_tombstones(
            conn,
            "propertyObject",
            [uuid.UUID(by_tombstone["id"]), uuid.UUID(by_snapshot["id"]), uuid.uuid4()],
            ctx,
        )
    assert (result.planned, result.applied, result.skipped, result.events) == (3, 1, 2, 1)
    row = one(engine, "SELECT deleted_at, version FROM chessboard.property_objects WHERE number = '1-1-2'")
    assert row["deleted_at"] is not None and row["version"] == 2
    payloads = [e["payload"] for e in outbox(engine, "property-object-upserted")]
    assert payloads[-1]["id"] == str(pid("propertyObject", by_tombstone)) and payloads[-1]["deletedAt"]
    assert (
        one(engine, "SELECT requested_count FROM chessboard.project_recalc_requests")["requested_count"] == 2
    )
    with engine.begin() as conn:
        again = apply_tombstones(conn, "propertyObject", [uuid.UUID(by_tombstone["id"])], ctx)
    assert (again.applied, again.skipped, again.events) == (0, 1, 0)
    # a Kafka key that is no UUID is poison, not a page failure
    with engine.begin() as conn:
        junk = apply_tombstones(conn, "propertyObject", ["not-a-key", None, by_tombstone["id"].upper()], ctx)
    assert (junk.planned, junk.applied, junk.skipped, junk.failed) == (3, 0, 1, 2)
    assert junk.quarantined == [("not-a-key", SYNC_VALIDATION_FAILED), (None, SYNC_VALIDATION_FAILED)]
    payloads = [
        r["payload"]
        for r in rows(engine, "SELECT payload FROM chessboard.talent_import_failed_items ORDER BY id")
    ]
    assert payloads == [{"id": "not-a-key", "tombstone": True}, {"id": None, "tombstone": True}]

    # a tombstoned project: upserted event with the project payload, its own recalc request
    with engine.begin() as conn:
        result = apply_tombstones(conn, "project", [uuid.UUID(tree.project["id"])], ctx)
    assert result.applied == 1
    assert outbox(engine, "project-upserted")[-1]["payload"]["version"] == 2


def test_poison_is_quarantined_again_in_a_later_run(engine, make_ctx):
    tree = Tree()
    tree.apply_parents(engine, make_ctx())
    poison = tree.obj("1-1-1", floor=201)
    before = IMPORT_FAILED_ITEMS._value.get()
    for run in (uuid.uuid4(), uuid.uuid4()):
        result = apply(engine, "propertyObject", [poison], make_ctx(run_id=run, stage="PropertyObjects"))
        assert (result.failed, result.skipped, result.applied) == (1, 0, 0)
        assert result.quarantined == [(poison["id"], SYNC_VALIDATION_FAILED)]
    failed = rows(engine, "SELECT run_id, error_message FROM chessboard.talent_import_failed_items")
    assert len({r["run_id"] for r in failed}) == 2
    assert "floor" in failed[0]["error_message"]
    assert IMPORT_FAILED_ITEMS._value.get() - before == 2


def test_streaming_sync_quarantines_under_the_nil_run_id(engine, make_ctx):
    ctx = make_ctx(run_id=None, stage="")
    bad = {"id": "not-a-uuid", "version": 1, "name": "x"}
    result = apply(engine, "developer", [bad, {"version": 1}], ctx)
    assert result.failed == 2
    failed = rows(
        engine,
        "SELECT run_id, stage, external_id, payload FROM chessboard.talent_import_failed_items ORDER BY id",
    )
    assert [(r["run_id"], r["stage"], r["external_id"]) for r in failed] == [
        (STREAMING_RUN_ID, "Developers", "not-a-uuid"),
        (STREAMING_RUN_ID, "Developers", None),
    ]
    assert failed[1]["payload"] == {"version": 1}


def test_unknown_enums_and_unresolved_references(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.project.update(type="Castle", constructionStatus="Frozen", regionId=999, cityId=2)
    enum_before = SYNC_UNKNOWN_ENUM.labels("project.type", "Castle")._value.get()
    ref_before = SYNC_UNRESOLVED_REFERENCE.labels("regionId")._value.get()
    tree.apply_parents(engine, ctx)
    project = one(engine, "SELECT type, construction_status, region_id, city_id FROM chessboard.projects")
    assert project == {
        "type": "ResidentialComplex",
        "construction_status": "UnderConstruction",
        "region_id": None,
        "city_id": 2,
    }
    result = apply(engine, "propertyObject", [tree.obj("1-1-1", "Frozen")], ctx)
    assert result.unknown_enums == [("propertyObject.status", "Frozen")]
    assert one(engine, "SELECT status FROM chessboard.property_objects")["status"] == "Hidden"
    assert SYNC_UNKNOWN_ENUM.labels("project.type", "Castle")._value.get() - enum_before == 1
    assert SYNC_UNRESOLVED_REFERENCE.labels("regionId")._value.get() - ref_before == 1
    payload = outbox(engine, "project-upserted")[0]["payload"]
    assert (payload["regionId"], payload["regionSnapshot"]) == (None, None)
    assert payload["citySnapshot"] == {"id": 2, "name": "Санкт-Петербург"}


def test_one_id_twice_in_a_batch_applies_in_order(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    v1 = tree.obj("1-1-1", price="100")
    v2 = {**v1, "version": 2, "price": "150"}
    stale = {**v1, "version": 1, "price": "1"}
    result = apply(engine, "propertyObject", [v1, v2, stale], ctx)
    assert (result.applied, result.created, result.skipped) == (2, 1, 1)
    row = one(engine, "SELECT version, replica_version, price FROM chessboard.property_objects")
    assert row == {"version": 2, "replica_version": 2, "price": Decimal("150")}
    prices = [(e["payload"]["oldPrice"], e["payload"]["newPrice"]) for e in outbox(engine, "price-changed")]
    assert prices == [(None, 100), (100, 150)]


def _stage_items(spec: DatasetSpec) -> list[tuple[str, list[dict]]]:
    return [(stage.entity, list(dataset.iter_items(spec, stage.collection))) for stage in STAGES]


def _run(engine, ctx, stages, page_size=7) -> dict[str, tuple[int, int, int, int]]:
    totals = {}
    for entity, items in stages:
        planned = applied = skipped = failed = 0
        for start in range(0, len(items), page_size):
            result = apply(engine, entity, items[start : start + page_size], ctx)
            planned += result.planned
            applied += result.applied
            skipped += result.skipped
            failed += result.failed
        totals[entity] = (planned, applied, skipped, failed)
    return totals


REPLICA_STATE_SQL = {
    table: f"SELECT * FROM chessboard.{table} ORDER BY id" for table in ENTITY_TABLES.values()
}
VOLATILE_COLUMNS = ("created_at", "updated_at", "last_synced_at")


def _replica_state(engine) -> dict:
    state = {
        table: [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS} for r in rows(engine, sql)]
        for table, sql in REPLICA_STATE_SQL.items()
    }
    state["events"] = [
        (e["topic"], e["message_key"], e["payload"])
        for e in rows(
            engine, "SELECT topic, message_key, payload FROM chessboard.outbox_messages ORDER BY id"
        )
    ]
    state["quarantine"] = rows(
        engine,
        "SELECT stage, external_id, error_code, error_message, payload "
        "FROM chessboard.talent_import_failed_items ORDER BY id",
    )
    state["recalc"] = rows(
        engine, "SELECT project_id, tenant_id FROM chessboard.project_recalc_requests ORDER BY 1"
    )
    return state


def test_batch_boundaries_do_not_change_the_result(engine, make_ctx):
    """A page of the import and one message at a time of the streaming sync give the same replica."""
    spec = DatasetSpec(
        objects_per_project=30,
        poison_every=7,
        unknown_enum_every=5,
        deleted_every=4,
        unknown_reference_every=2,
    )
    stages = _stage_items(spec)
    _run(engine, make_ctx(), stages, page_size=1000)
    paged = _replica_state(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "TRUNCATE chessboard.property_objects, chessboard.layouts, chessboard.layout_groups, "
                "chessboard.buildings, chessboard.projects, chessboard.developers, chessboard.outbox_messages, "
                "chessboard.talent_import_failed_items, chessboard.project_recalc_requests"
            )
        )
    _run(engine, make_ctx(run_id=None), stages, page_size=1)
    one_by_one = _replica_state(engine)
    assert paged["property_objects"] and paged["quarantine"]
    assert one_by_one == paged


def test_dry_run_writes_nothing_and_counts_like_a_real_run(engine, make_ctx):
    spec = DatasetSpec(
        developers=2,
        projects_per_developer=2,
        buildings_per_project=2,
        objects_per_project=40,
        poison_every=9,
        unknown_enum_every=7,
        deleted_every=11,
        unknown_reference_every=3,
    )
    stages = _stage_items(spec)
    orphan = {**stages[-1][1][0], "id": tid(), "buildingId": tid()}
    stages[-1][1].append(orphan)
    state = DryRunState()
    empty = counts(engine)
    dry = _run(engine, make_ctx(dry_run=True, dry_run_state=state), stages)
    assert counts(engine) == empty
    assert dry["propertyObject"][3] > 3  # poison, duplicates and the orphan counted as failed
    real = _run(engine, make_ctx(), stages)
    assert dry == real
    # the DryRun state is shared by workers: a second dry run over the same state sees everything applied
    again = _run(engine, make_ctx(dry_run=True, dry_run_state=state), stages[:1])
    assert again["developer"] == (2, 0, 2, 0)


def test_dry_run_sees_its_own_duplicates_and_deletions(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    holder = tree.obj("1-1-1")
    apply(engine, "propertyObject", [holder], ctx)
    empty = counts(engine)
    dry = make_ctx(dry_run=True, dry_run_state=DryRunState())
    newcomer = tree.obj("1-1-1")
    assert apply(engine, "propertyObject", [newcomer], dry).quarantined == [
        (newcomer["id"], SYNC_DUPLICATE_NUMBER)
    ]
    with engine.begin() as conn:
        assert apply_tombstones(conn, "propertyObject", [uuid.UUID(holder["id"])], dry).applied == 1
    result = apply(engine, "propertyObject", [newcomer, tree.obj("1-1-1")], dry)
    assert (result.applied, result.failed) == (1, 1)
    assert counts(engine) == empty


def test_dry_run_state_is_shared_by_worker_threads(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    # 4 pages of 10 objects; every number appears on two pages: 20 applied, 20 duplicates
    pages = [[tree.obj(f"n-{(page % 2) * 10 + i}") for i in range(10)] for page in range(4)]
    dry = make_ctx(dry_run=True, dry_run_state=DryRunState())
    results: list[ApplyResult] = []
    errors: list[BaseException] = []

    def worker(page: list[dict]) -> None:
        try:
            results.append(apply(engine, "propertyObject", page, dry))
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(page,)) for page in pages]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert sum(r.applied for r in results) == 20 and sum(r.failed for r in results) == 20
    assert {code for r in results for _, code in r.quarantined} == {SYNC_DUPLICATE_NUMBER}
    assert one(engine, "SELECT count(*) AS n FROM chessboard.property_objects")["n"] == 0


def _wait_for_lock_waiter(engine, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = one(
            engine,
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )["n"]
        if waiting:
            return
        time.sleep(0.01)
    raise AssertionError("no backend waits on a lock")


def test_concurrent_pages_racing_for_one_number_raise_for_a_retry(engine, make_ctx):
    ctx = make_ctx()
    tree = Tree()
    tree.apply_parents(engine, ctx)
    first, second = tree.obj("1-1-1"), tree.obj("1-1-1")
    outcome: dict[str, BaseException | None] = {}
    conn = engine.connect()
    trans = conn.begin()
    apply_snapshots(conn, "propertyObject", [first], ctx)

    def other_page() -> None:
        try:
            apply(engine, "propertyObject", [second], ctx)
            outcome["error"] = None
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            outcome["error"] = exc

    worker = threading.Thread(target=other_page)
    worker.start()
    _wait_for_lock_waiter(engine)  # the other page blocks on the uncommitted live number
    assert worker.is_alive()
    trans.commit()
    conn.close()
    worker.join(timeout=30)
    assert isinstance(outcome["error"], IntegrityError)
    # the retry of the page quarantines the duplicate
    assert apply(engine, "propertyObject", [second], ctx).quarantined == [
        (second["id"], SYNC_DUPLICATE_NUMBER)
    ]

"""The replica apply path against a real PostgreSQL: rows, outbox events and recalc requests of creates, updates and re-applies."""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal

import sqlalchemy as sa

from pin_chessboard_pipelines.events.outbox import OutboxEvent
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.replica import (
    RUN_ID,
    Tree,
    apply,
    apply_in_pages,
    counts,
    one,
    outbox,
    pid,
    replica_state,
    rows,
    stage_items,
    tid,
)


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
    # one request per touched project per import run, whatever the stages and pages that touched
    # it; held for the run until it finishes
    request = one(engine, "SELECT * FROM chessboard.project_recalc_requests")
    assert (request["project_id"], request["tenant_id"], request["last_reason"]) == (
        project_pin,
        developer_pin,
        "TalentSync",
    )
    assert request["requested_count"] == 1
    assert request["import_run_id"] == RUN_ID


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


def test_batch_boundaries_do_not_change_the_result(engine, make_ctx):
    """A page of the import and one message at a time of the streaming sync give the same replica."""
    spec = DatasetSpec(
        objects_per_project=30,
        poison_every=7,
        unknown_enum_every=5,
        deleted_every=4,
        unknown_reference_every=2,
    )
    stages = stage_items(spec)
    apply_in_pages(engine, make_ctx(), stages, page_size=1000)
    paged = replica_state(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "TRUNCATE chessboard.property_objects, chessboard.layouts, chessboard.layout_groups, "
                "chessboard.buildings, chessboard.projects, chessboard.developers, chessboard.outbox_messages, "
                "chessboard.talent_import_failed_items, chessboard.project_recalc_requests"
            )
        )
    apply_in_pages(engine, make_ctx(run_id=None), stages, page_size=1)
    one_by_one = replica_state(engine)
    assert paged["property_objects"] and paged["quarantine"]
    assert one_by_one == paged

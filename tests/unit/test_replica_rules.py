"""The apply path's decisions (replica/rules.py), without a database."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.errors import SYNC_PARENT_MISMATCH, SYNC_PARENT_NOT_FOUND
from pin_chessboard_pipelines.events import payloads
from pin_chessboard_pipelines.replica import rules
from pin_chessboard_pipelines.talent.snapshots import TalentRecord


def record(talent_id: str = "t1", version: int = 1, **parents: str) -> TalentRecord:
    return TalentRecord("propertyObject", talent_id, version, {}, dict(parents))


@dataclass
class Decision:
    record: TalentRecord
    values: dict[str, Any] = field(default_factory=dict)
    old: dict[str, Any] | None = None

    @property
    def talent_id(self) -> str:
        return self.record.talent_id


def test_repeated_ids_go_to_later_rounds_in_batch_order():
    items = [Decision(record(t)) for t in ("a", "b", "a", "a", "c", "b")]
    got = [[i.talent_id for i in r] for r in rules.rounds(items)]
    assert got == [["a", "b", "c"], ["a", "b"], ["a"]]


def test_parents_fill_tenant_and_project_or_quarantine():
    parents = {"B1": {"project_id": "P1", "tenant_id": "T1"}}
    layouts = {"L1": {"project_id": "P1"}, "L2": {"project_id": "P2"}}
    obj = entities.PROPERTY_OBJECT
    values = {"building_id": "B1", "layout_id": "L1"}
    assert rules.check_parents(obj, values, record(building="b", layout="l"), parents, layouts) is None
    assert values == {"building_id": "B1", "layout_id": "L1", "project_id": "P1", "tenant_id": "T1"}
    missing = rules.check_parents(obj, {"building_id": "B9"}, record(building="b9"), parents, layouts)
    assert missing == (SYNC_PARENT_NOT_FOUND, "propertyObject: building b9 is not in the replica")
    other = rules.check_parents(
        obj, {"building_id": "B1", "layout_id": "L2"}, record(building="b", layout="l2"), parents, layouts
    )
    assert other == (SYNC_PARENT_MISMATCH, "propertyObject: layout l2 belongs to another project")
    no_layout = {"building_id": "B1", "layout_id": None}
    assert rules.check_parents(obj, no_layout, record(building="b"), parents, layouts) is None
    assert rules.check_parents(entities.DEVELOPER, {}, record(), {}, {}) is None


def test_a_developer_is_its_own_tenant():
    rows = rules.with_developer_tenants("developer", {"D": {"id": "D"}})
    assert rows["D"]["tenant_id"] == "D"
    assert "tenant_id" not in rules.with_developer_tenants("project", {"P": {"id": "P"}})["P"]


def test_version_guard_and_status_conflict():
    assert rules.is_stale({"replica_version": 5}, 5)
    assert not rules.is_stale({"replica_version": 4}, 5)
    assert not rules.is_stale(None, 1)
    held = {"status": "Reserved", "status_source": "Pin"}
    assert "PIN holds it Reserved" in (
        rules.status_conflict("propertyObject", {"status": "Sold"}, held) or ""
    )
    assert (
        rules.status_conflict("propertyObject", {"status": "Sold"}, {**held, "status_source": "TalentSync"})
        is None
    )
    assert rules.status_conflict("propertyObject", {"status": "Free"}, held) is None
    assert rules.status_conflict("propertyObject", {"status": "Sold"}, None) is None


def test_the_first_live_object_keeps_a_number_and_a_move_releases_the_old_one():
    def obj(talent_id, building, number, old=None, deleted=None):
        return Decision(
            record(talent_id), {"building_id": building, "number": number, "deleted_at": deleted}, old
        )

    moved_from = {"building_id": "B", "number": "1", "deleted_at": None}
    first, second, mover, third = (
        obj("a", "B", "7"),
        obj("b", "B", "7"),
        obj("c", "B", "2", moved_from),
        obj("d", "B", "1"),
    )
    taken: dict[tuple[str, str], str | None] = {("B", "9"): "x"}
    kept, rejected = rules.claim_live_numbers([first, second, mover, third], taken)
    assert [i.talent_id for i in kept] == ["a", "c", "d"]
    assert [(i.talent_id, "already taken by live object a" in m) for i, m in rejected] == [("b", True)]
    assert taken == {("B", "9"): "x", ("B", "7"): "a", ("B", "1"): "d", ("B", "2"): "c"}
    assert rules.wanted_numbers([first, obj("e", "B", "3", deleted=datetime.now(UTC))]) == {("B", "7")}


def test_change_events_of_a_property_object():
    row = {"id": "i", "project_id": "p", "price": Decimal(10), "status": "Sold", "version": 2}
    created = rules.object_change_events(row, None)
    assert [t for t, _ in created] == [
        payloads.PROPERTY_OBJECT_PRICE_CHANGED,
        payloads.PROPERTY_OBJECT_STATUS_CHANGED,
    ]
    assert rules.object_change_events(row, {"price": Decimal(10), "status": "Sold"}) == []
    [(kind, payload)] = rules.object_change_events(row, {"price": Decimal(9), "status": "Sold"})
    assert kind == payloads.PROPERTY_OBJECT_PRICE_CHANGED and payload["oldPrice"] == 9
    assert rules.object_change_events({**row, "price": None, "status": "Free"}, None) == []


def test_touched_projects_dry_run_rows_and_released_numbers():
    assert rules.touched_project("project", {"id": 1, "tenant_id": 2}) == ("1", "2")
    assert rules.touched_project("layout", {"project_id": 3, "tenant_id": 2}) == ("3", "2")
    assert rules.touched_project("developer", {"id": 1}) is None
    stored = rules.dry_run_row("propertyObject", {"number": "2"}, {"number": "1", "version": 4})
    assert stored == {"number": "2", "version": 5, "status_source": rules.TALENT_SYNC}
    assert rules.dry_run_row("layout", {"name": "x"}, None) == {"name": "x", "version": 1}
    old = {"building_id": "B", "number": "1", "external_talent_id": "a", "deleted_at": None}
    now = datetime.now(UTC)
    assert rules.released_number("propertyObject", {"deleted_at": now}, old) == (("B", "1"), "a")
    assert rules.released_number("propertyObject", {"deleted_at": None}, old) is None
    assert rules.released_number("layout", {"deleted_at": now}, old) is None


def test_a_delete_read_from_the_topic_supersedes_what_was_read_before_it_or_from_no_topic():
    from pin_chessboard_pipelines.replica.rules import superseded_by_delete
    from pin_chessboard_pipelines.talent.topic_reader import Source

    deleted_at = (2, 10)  # the tombstone: partition 2, offset 10
    topic = "talent.chessboard.projects.v1"
    assert superseded_by_delete(Source(topic, 2, 9), deleted_at)  # a dead letter of before the delete
    assert superseded_by_delete(None, deleted_at)  # ApiPull: it cannot say when it read
    assert not superseded_by_delete(Source(topic, 2, 11), deleted_at)  # re-created after the delete
    assert not superseded_by_delete(Source(topic, 2, 9), None)  # never deleted: the version guard decides
    assert not superseded_by_delete(None, None)
    assert not superseded_by_delete(Source(topic, 0, 3), deleted_at)  # repartitioned: the version guard
    assert not superseded_by_delete(Source(topic, 2, 9), (None, None))  # a delete of no known position


def test_a_topic_item_carries_where_it_was_read_and_no_snapshot_field_says_otherwise():
    from pin_chessboard_pipelines.replica.quarantine import payload_json
    from pin_chessboard_pipelines.talent.topic_reader import SOURCE, Source, decode_message, source_of

    at = Source("talent.chessboard.projects.v1", 1, 42)
    item = decode_message(b"k", b'{"id": "k", "version": 1, "__source__": ["x", 0, 0]}', at)
    assert source_of(item) == at and source_of(decode_message(b"k", None, at)) == at
    assert source_of(decode_message(b"k", b'{"id": "k", "__source__": ["x", 0, 0]}')) is None
    assert source_of({"id": "k"}) is None and source_of({SOURCE: ["t", "x", 1]}) is None
    assert payload_json(item) == '{"id":"k","version":1}'


def test_the_items_that_wait_for_an_entity_name_it_in_their_parent_fields():
    from pin_chessboard_pipelines.replica.waiting import parent_fields

    assert parent_fields(entities.DEVELOPER) == {}
    assert parent_fields(entities.BUILDING) == {"project": "projectId"}
    assert parent_fields(entities.LAYOUT) == {"project": "projectId", "layoutGroup": "layoutGroupId"}
    assert parent_fields(entities.PROPERTY_OBJECT) == {"building": "buildingId", "layout": "layoutId"}

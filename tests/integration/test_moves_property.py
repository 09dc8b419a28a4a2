"""Property: moves of property objects, buildings, layouts and layout groups across projects and
developers, interleaved with edits, deletes and drains, applied through the streaming path. After
the last drain the audit finds 0 divergences at every level (projects, buildings, layouts, layout
groups), and the replica equals what a fresh bootstrap of the final Talent source produces.

The Talent source is a model that keeps Talent's own rules after every change (talent-source.md:
a layout's group and an object's layout are of the same project as the layout / the building):
when a building or layout group moves, Talent sends the children whose links it had to change.
A change reaches the replica in parent -> child batches, with drains possibly in between, so the
replica also sees the moments where a group sits in another project than its layouts.

One database for every example: each one starts from emptied tables.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pin_chessboard_pipelines.recalc.audit import audit
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.replica.apply import apply_snapshots
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.tables import REPLICA_TABLES
from tests.support.replica import context_factory

EXAMPLES = 200
STATUSES = ["Free", "Reserved", "Booked", "Sold", "Hidden"]
# Differ between an incremental history and a bootstrap by design: bookkeeping times and the PIN
# domain version (+1 per published change).
HISTORY_COLUMNS = frozenset({"created_at", "updated_at", "last_synced_at", "version"})
EMPTIED = (  # children first
    "property_objects",
    "layouts",
    "layout_groups",
    "buildings",
    "projects",
    "developers",
    "project_recalc_requests",
    "outbox_messages",
    "talent_import_failed_items",
)
SEEDED = tuple(reversed(EMPTIED[:6]))  # parents first
ORDER = ("developer", "project", "building", "layoutGroup", "layout", "propertyObject")
_ids = itertools.count(1000)  # added objects; the initial tree's ids are below


def _tid() -> str:
    return str(uuid.UUID(int=next(_ids)))


@dataclass
class Source:
    """Talent's current snapshots by entity and Talent id."""

    items: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: {e: {} for e in ORDER})

    def of(self, entity: str) -> list[dict[str, Any]]:
        return list(self.items[entity].values())

    def changed(self, entity: str, item: dict[str, Any], **fields: Any) -> tuple[str, dict[str, Any]]:
        """A newer snapshot of `item` with `fields`; the source keeps it."""
        new = {**item, **fields, "version": item["version"] + 1}
        self.items[entity][new["id"]] = new
        return entity, new

    def project_of(self, entity: str, item: dict[str, Any]) -> str:
        if entity == "propertyObject":
            return self.items["building"][item["buildingId"]]["projectId"]
        return item["projectId"]


def initial_source() -> Source:
    """The same tree every time (fixed ids): the store is seeded with it once per test."""
    source = Source()
    initial_ids = itertools.count(1)

    def add(entity: str, **fields: Any) -> str:
        item = {"id": str(uuid.UUID(int=next(initial_ids))), "version": 1, **fields}
        source.items[entity][item["id"]] = item
        return item["id"]

    d1 = add("developer", name="ГК Север", inn="7701234567")
    d2 = add("developer", name="ГК Юг", inn="7701234568")
    project = {
        "type": "ResidentialComplex",
        "class": "Comfort",
        "constructionStatus": "UnderConstruction",
        "countryId": 643,
        "currencyId": 643,
    }
    p1 = add("project", developerId=d1, name="P1", **project)
    p2 = add("project", developerId=d1, name="P2", **project)
    p3 = add("project", developerId=d2, name="P3", **project)
    buildings = [
        add("building", projectId=p, name=f"B{i}", floorsCount=9) for i, p in enumerate((p1, p1, p2, p3))
    ]
    groups = [add("layoutGroup", projectId=p, name=f"G{i}", rooms=1) for i, p in enumerate((p1, p2, p3))]
    layouts = [
        add("layout", projectId=p, layoutGroupId=g, name=f"L{i}", rooms=1, totalArea=f"{30 + i}.5")
        for i, (p, g) in enumerate(
            ((p1, groups[0]), (p1, None), (p2, groups[1]), (p3, groups[2]), (p3, None))
        )
    ]
    placements = [(0, 0), (0, 1), (1, 0), (1, None), (2, 2), (2, 2), (3, 3), (3, 4)]
    for n, (b, lay) in enumerate(placements):
        add(
            "propertyObject",
            buildingId=buildings[b],
            layoutId=None if lay is None else layouts[lay],
            number=f"{n + 1}",
            floor=n % 5,
            status=STATUSES[n % len(STATUSES)],
            price=f"{1000 + n}.25",
            totalArea="40.5",
        )
    return source


# One change = parent -> child batches of snapshots: [(entity, [snapshot, ...]), ...].
Batches = list[list[tuple[str, dict[str, Any]]]]


def _pick(items: list[dict[str, Any]], i: int) -> dict[str, Any]:
    return items[i % len(items)]


def _layouts_of(source: Source, project_id: str) -> list[dict[str, Any]]:
    return [lay for lay in source.of("layout") if lay["projectId"] == project_id]


def _unlink_objects(source: Source, layout_ids: set[str], keep_in: str | None = None) -> list:
    """Talent's own rule after a move: an object's layout is of its building's project."""
    changed = []
    for obj in source.of("propertyObject"):
        if obj["layoutId"] in layout_ids and source.project_of("propertyObject", obj) != keep_in:
            changed.append(source.changed("propertyObject", obj, layoutId=None))
    return changed


def change(source: Source, op: tuple) -> Batches:
    kind, i, j = op
    objects, buildings = source.of("propertyObject"), source.of("building")
    layouts, groups, projects = source.of("layout"), source.of("layoutGroup"), source.of("project")
    obj = _pick(objects, i)
    if kind == "status":
        return [[source.changed("propertyObject", obj, status=STATUSES[j % len(STATUSES)])]]
    if kind == "price":
        return [[source.changed("propertyObject", obj, price=None if j % 4 == 0 else f"{j}.50")]]
    if kind == "delete_object":
        deleted = None if obj.get("deletedAt") else "2026-11-01T10:00:00Z"
        return [[source.changed("propertyObject", obj, deletedAt=deleted)]]
    if kind == "add_object":
        building = _pick(buildings, i)
        candidates = _layouts_of(source, building["projectId"])
        item = {
            "id": _tid(),
            "version": 1,
            "buildingId": building["id"],
            "layoutId": _pick(candidates, j)["id"] if candidates and j % 3 else None,
            "number": f"n{next(_ids)}",
            "floor": 1,
            "status": STATUSES[j % len(STATUSES)],
            "price": f"{500 + j}.00",
            "totalArea": "33.3",
        }
        source.items["propertyObject"][item["id"]] = item
        return [[("propertyObject", item)]]
    if kind == "area":
        return [[source.changed("layout", _pick(layouts, i), totalArea=f"{20 + j % 50}.25")]]
    if kind == "delete_layout":
        layout = _pick(layouts, i)
        return [
            [
                source.changed(
                    "layout", layout, deletedAt=None if layout.get("deletedAt") else "2026-11-02T10:00:00Z"
                )
            ]
        ]
    if kind == "delete_building":
        building = _pick(buildings, i)
        return [
            [
                source.changed(
                    "building",
                    building,
                    deletedAt=None if building.get("deletedAt") else "2026-11-03T10:00:00Z",
                )
            ]
        ]
    if kind == "move_object":  # to another building (any project) and a layout of its project
        building = _pick(buildings, j)
        candidates = _layouts_of(source, building["projectId"])
        layout = _pick(candidates, i + j)["id"] if candidates and (i + j) % 3 else None
        return [[source.changed("propertyObject", obj, buildingId=building["id"], layoutId=layout)]]
    if kind == "move_object_layout":
        candidates = _layouts_of(source, source.project_of("propertyObject", obj))
        layout = _pick(candidates, j)["id"] if candidates and j % 4 else None
        return [[source.changed("propertyObject", obj, layoutId=layout)]]
    if kind == "move_building":  # to another project, maybe another developer's
        building = _pick(buildings, i)
        target = _pick(projects, j)["id"]
        moved = [source.changed("building", building, projectId=target)]
        ids = {o["id"] for o in objects if o["buildingId"] == building["id"]}
        linked = {o["layoutId"] for o in objects if o["id"] in ids and o["layoutId"] is not None}
        foreign = {lay for lay in linked if source.items["layout"][lay]["projectId"] != target}
        fixes = [
            source.changed("propertyObject", source.items["propertyObject"][o], layoutId=None)
            for o in sorted(ids)
            if source.items["propertyObject"][o]["layoutId"] in foreign
        ]
        return [moved, fixes] if fixes else [moved]
    if kind == "move_layout":  # to another project (a group of it or none) or another group
        layout = _pick(layouts, i)
        target = _pick(projects, j)["id"]
        in_target = [g for g in groups if g["projectId"] == target]
        group = _pick(in_target, i + j)["id"] if in_target and (i + j) % 3 else None
        moved = [source.changed("layout", layout, projectId=target, layoutGroupId=group)]
        fixes = _unlink_objects(source, {layout["id"]}, keep_in=target)
        return [moved, fixes] if fixes else [moved]
    if kind == "move_group":  # to another project: its layouts follow, their objects unlink
        group = _pick(groups, i)
        target = _pick(projects, j)["id"]
        moved = [source.changed("layoutGroup", group, projectId=target)]
        followers = [
            source.changed("layout", lay, projectId=target)
            for lay in layouts
            if lay.get("layoutGroupId") == group["id"]
        ]
        fixes = _unlink_objects(source, {lay["id"] for _, lay in followers}, keep_in=target)
        return [b for b in (moved, followers, fixes) if b]
    raise AssertionError(kind)


MOVES = ("move_object", "move_object_layout", "move_building", "move_layout", "move_group")
EDITS = ("status", "price", "delete_object", "add_object", "area", "delete_layout", "delete_building")
index = st.integers(0, 60)


@st.composite
def sequences(draw) -> list[tuple]:
    """At least one move, interleaved with edits and drains; `split` drains between the batches of
    one change (a parent applied, its children not yet)."""
    moves = draw(st.lists(st.tuples(st.sampled_from(MOVES), index, index), min_size=1, max_size=4))
    edits = draw(st.lists(st.tuples(st.sampled_from(EDITS), index, index), max_size=4))
    drains = draw(st.lists(st.just(("drain", 0, 0)), max_size=2))
    ops = draw(st.permutations(moves + edits + drains))
    split = st.sampled_from([False, False, False, True])
    splits = draw(st.lists(split, min_size=len(ops), max_size=len(ops)))
    return [(*op, split) for op, split in zip(ops, splits, strict=True)]


@pytest.fixture
def store(db_url):
    # a scratch database: commits need not wait for the disk (hundreds of small transactions)
    engine = get_engine(db_url)
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT set_config('synchronous_commit', 'off', false)"))
        conn.execute(sa.text(f'ALTER DATABASE "{engine.url.database}" SET synchronous_commit = off'))
    engine.dispose()
    ctx = context_factory(engine)(run_id=None, debounce_seconds=0, cap_seconds=0)
    _bootstrap(engine, ctx, initial_source())
    _drain(engine, ctx)
    with engine.begin() as conn:  # the seeded tree, copied back at the start of every example
        conn.execute(sa.text("CREATE SCHEMA seed"))
        for table in SEEDED:
            conn.execute(sa.text(f"CREATE TABLE seed.{table} AS SELECT * FROM chessboard.{table}"))
    return engine, ctx


def _apply(engine, ctx, batch: list[tuple[str, dict[str, Any]]]) -> None:
    for entity in ORDER:
        items = [item for e, item in batch if e == entity]
        if items:
            with engine.begin() as conn:
                result = apply_snapshots(conn, entity, items, ctx)
            assert result.failed == 0, (entity, result.quarantined)


def _drain(engine, ctx) -> None:
    result = drain(engine, batch_size=10)
    assert result.failed == 0


def _bootstrap(engine, ctx, source: Source) -> None:
    _apply(engine, ctx, [(entity, item) for entity in ORDER for item in source.of(entity)])


def _empty(engine, seeded: bool = False) -> None:
    with engine.begin() as conn:  # DELETE: on a handful of rows far cheaper than TRUNCATE
        for table in EMPTIED:
            conn.execute(sa.text(f"DELETE FROM chessboard.{table}"))
        for table in SEEDED if seeded else ():
            conn.execute(sa.text(f"INSERT INTO chessboard.{table} SELECT * FROM seed.{table}"))


def _state(engine) -> dict[str, list[tuple]]:
    state = {}
    with engine.connect() as conn:
        for table in REPLICA_TABLES:
            columns = [c for c in table.c if c.name not in HISTORY_COLUMNS]
            rows = conn.execute(sa.select(*columns)).all()
            state[table.name] = sorted(tuple(_clean(v) for v in row) for row in rows)
    return state


def _clean(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value.normalize())
    return str(value) if value is not None and not isinstance(value, bool | int | str) else value


def _audit_lines(engine) -> list[str]:
    with engine.connect() as conn:
        return [d.line() for d in audit(conn)]


@settings(
    max_examples=EXAMPLES,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=sequences())
def test_after_any_moves_the_audit_is_0_at_every_level_and_the_replica_equals_a_bootstrap(store, sequence):
    engine, ctx = store
    _empty(engine, seeded=True)
    source = initial_source()
    event(f"moves per sequence: {sum(op[0] in MOVES for op in sequence)}")
    for kind, i, j, split in sequence:
        if kind == "drain":
            _drain(engine, ctx)
            continue
        for batch in change(source, (kind, i, j)):
            _apply(engine, ctx, batch)
            if split:
                _drain(engine, ctx)
    _drain(engine, ctx)
    assert _audit_lines(engine) == []
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM chessboard.project_recalc_requests")).scalar() == 0
    replayed = _state(engine)

    _empty(engine)
    _bootstrap(engine, ctx, copy.deepcopy(source))
    _drain(engine, ctx)
    assert _audit_lines(engine) == []
    fresh = _state(engine)
    for table in fresh:
        assert replayed[table] == fresh[table], table

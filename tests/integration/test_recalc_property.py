"""Property: after any sequence of object/layout edits (with drains in between), one more drain
leaves every aggregate equal to its formula and the audit finds 0 divergences."""

from __future__ import annotations

from decimal import Decimal

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pin_chessboard_pipelines.recalc.audit import audit
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from pin_chessboard_pipelines.store.tables import (
    buildings,
    layout_groups,
    layouts,
    projects,
    property_objects,
)
from tests.support.aggregates import (
    BuildingAggregates,
    LayoutAggregates,
    LayoutGroupAggregates,
    ProjectAggregates,
    expected_aggregates,
)
from tests.support.recalc_data import StoreBuilder

STATUSES = ["Free", "Reserved", "Booked", "Sold", "Hidden"]
prices = st.one_of(st.none(), st.integers(0, 10**8).map(lambda cents: Decimal(cents) / 100))
areas = st.integers(1, 10**6).map(lambda centi: Decimal(centi) / 100)
index = st.integers(0, 1000)

edits = st.one_of(
    st.tuples(st.just("status"), index, st.sampled_from(STATUSES)),
    st.tuples(st.just("price"), index, prices),
    st.tuples(st.just("delete_object"), index, st.booleans()),
    st.tuples(st.just("object_layout"), index, st.one_of(st.none(), index)),
    st.tuples(st.just("object_building"), index, index),
    st.tuples(st.just("add_object"), index, st.tuples(st.sampled_from(STATUSES), prices)),
    st.tuples(st.just("area"), index, areas),
    st.tuples(st.just("layout_group"), index, st.one_of(st.none(), index)),
    st.tuples(st.just("delete_layout"), index, st.booleans()),
    st.tuples(st.just("drain"), st.just(0), st.just(None)),
)


def _apply(conn, builder: StoreBuilder, project, edit) -> None:
    kind, i, value = edit
    obj = project.objects[i % len(project.objects)] if project.objects else None
    lay = project.layouts[i % len(project.layouts)]
    if kind == "status" and obj:
        conn.execute(sa.update(property_objects).where(property_objects.c.id == obj).values(status=value))
    elif kind == "price" and obj:
        conn.execute(sa.update(property_objects).where(property_objects.c.id == obj).values(price=value))
    elif kind == "delete_object" and obj:
        conn.execute(
            sa.update(property_objects)
            .where(property_objects.c.id == obj)
            .values(deleted_at=sa.func.now() if value else None)
        )
    elif kind == "object_layout" and obj:
        target = None if value is None else project.layouts[value % len(project.layouts)]
        conn.execute(sa.update(property_objects).where(property_objects.c.id == obj).values(layout_id=target))
    elif kind == "object_building" and obj:
        target = project.buildings[value % len(project.buildings)]
        conn.execute(
            sa.update(property_objects).where(property_objects.c.id == obj).values(building_id=target)
        )
    elif kind == "add_object":
        status, price = value
        building = project.buildings[i % len(project.buildings)]
        builder.objects(project, [(building, lay if i % 3 else None, status, price, False)])
    elif kind == "area":
        conn.execute(sa.update(layouts).where(layouts.c.id == lay).values(total_area=value))
    elif kind == "layout_group":
        target = None if value is None else project.layout_groups[value % len(project.layout_groups)]
        conn.execute(sa.update(layouts).where(layouts.c.id == lay).values(layout_group_id=target))
    elif kind == "delete_layout":
        conn.execute(
            sa.update(layouts).where(layouts.c.id == lay).values(deleted_at=sa.func.now() if value else None)
        )


def _enqueue(conn, project) -> None:
    enqueue_recalc(
        conn, [(project.id, project.tenant_id)], RecalcReason.CRUD, debounce_seconds=0, cap_seconds=0
    )


def _rows(conn, table, column, value) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.select(table).where(column == value)).mappings()]


@settings(
    max_examples=60,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=st.lists(edits, max_size=25))
def test_aggregates_equal_the_formulas_after_any_edits(engine, sequence):
    with engine.begin() as conn:
        builder = StoreBuilder(conn)
        project = builder.project()
        b1, _ = builder.buildings(project, 2)
        g1, g2 = builder.layout_groups(project, 2)
        builder.layouts(project, [(g1, "30", False), (g1, "45.5", False), (g2, "70", False)])
        builder.objects(project, [(b1, project.layouts[0], "Free", "100", False)])
    for edit in sequence:
        with engine.begin() as conn:
            builder = StoreBuilder(conn)
            builder._numbers = len(project.objects) + 1000
            _apply(conn, builder, project, edit)
            _enqueue(conn, project)
        if edit[0] == "drain":
            drain(engine, batch_size=5)
    with engine.begin() as conn:
        _enqueue(conn, project)
    result = drain(engine)
    assert result.failed == 0

    with engine.connect() as conn:
        p = _rows(conn, projects, projects.c.id, project.id)[0]
        bs = _rows(conn, buildings, buildings.c.project_id, project.id)
        gs = _rows(conn, layout_groups, layout_groups.c.project_id, project.id)
        ls = _rows(conn, layouts, layouts.c.project_id, project.id)
        objs = _rows(conn, property_objects, property_objects.c.project_id, project.id)
        divergences = audit(conn, project.id)
    expected = expected_aggregates([b["id"] for b in bs], [g["id"] for g in gs], ls, objs)
    assert (
        ProjectAggregates(
            p["price_min"],
            p["price_max"],
            p["property_objects_total_count"],
            p["property_objects_free_count"],
        )
        == expected.project
    )
    assert {
        b["id"]: BuildingAggregates(b["property_objects_total_count"], b["property_objects_free_count"])
        for b in bs
    } == expected.buildings
    assert {row["id"]: LayoutAggregates(row["property_objects_count"]) for row in ls} == expected.layouts
    assert {
        g["id"]: LayoutGroupAggregates(g["layouts_count"], g["area_min"], g["area_max"]) for g in gs
    } == expected.layout_groups
    assert divergences == []

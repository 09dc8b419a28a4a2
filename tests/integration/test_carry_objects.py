"""Runbook "carry left-behind objects": objects left in the old project by a building move applied
before moves carried objects take their building's project, are published, and both projects'
recalcs bring the audit back to 0 at every level."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.recalc.audit import audit
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.replica.repair import carry_left_behind_objects
from tests.support.replica import Tree, apply, context_factory, outbox, pid, rows

# every event written meets its schema (tests/support/contracts.py)
pytestmark = pytest.mark.usefixtures("outbox_contract")


def _totals(engine, *trees: Tree) -> tuple[int, ...]:
    counts = {
        r["id"]: r["n"]
        for r in rows(engine, "SELECT id, property_objects_total_count AS n FROM chessboard.projects")
    }
    return tuple(counts[pid("project", t.project)] for t in trees)


def test_left_behind_objects_follow_their_building(engine):
    ctx = context_factory(engine)(run_id=None, debounce_seconds=0, cap_seconds=0)
    tree, other = Tree(), Tree()
    tree.apply_parents(engine, ctx)
    other.apply_parents(engine, ctx)
    apply(engine, "propertyObject", [tree.obj(f"1-{i}") for i in range(4)], ctx)
    with engine.begin() as conn:  # the building moved the way it did before v1.2: alone
        conn.execute(
            sa.text("UPDATE chessboard.buildings SET project_id = :p, tenant_id = :t WHERE id = :b"),
            {
                "p": pid("project", other.project),
                "t": pid("developer", other.developer),
                "b": pid("building", tree.building),
            },
        )
    assert drain(engine).failed == 0
    assert _totals(engine, tree, other) == (4, 0)  # the old project still counts the moved building's objects

    with engine.begin() as conn:
        carried = carry_left_behind_objects(conn, correlation_id="c", debounce_seconds=0, cap_seconds=0)
    assert (carried.objects, carried.projects) == (4, 2)
    objects = rows(engine, "SELECT project_id, tenant_id, version FROM chessboard.property_objects")
    assert {(r["project_id"], r["tenant_id"], r["version"]) for r in objects} == {
        (pid("project", other.project), pid("developer", other.developer), 2)
    }
    events = outbox(engine, "property-object-upserted")[-4:]
    assert {e["payload"]["projectId"] for e in events} == {str(pid("project", other.project))}
    assert drain(engine).failed == 0
    with engine.connect() as conn:
        assert [d.line() for d in audit(conn)] == []
    assert _totals(engine, tree, other) == (0, 4)
    with engine.begin() as conn:  # nothing left behind: a no-op
        again = carry_left_behind_objects(conn, correlation_id="c", debounce_seconds=0, cap_seconds=0)
    assert (again.objects, again.projects) == (0, 0)

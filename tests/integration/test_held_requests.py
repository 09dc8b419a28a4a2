"""Held recalc requests (docs/store.md#held-requests): only an import run's own requests are held,
every end of the run releases them by the debounce and the cap, `recalc status` and the gauge show
held rows apart from due ones. And a DryRun bumps no version where the real upsert bumps none."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import (
    enqueue_recalc,
    queue_status,
    release_dagster_run_requests,
    release_ended_import_requests,
    release_import_requests,
)
from pin_chessboard_pipelines.replica.apply import DryRunState
from pin_chessboard_pipelines.store.queries import queries
from tests.support.import_runs import insert_import_run
from tests.support.replica import RUN_ID, Tree, apply, one, pid

DEBOUNCE, CAP = 30.0, 300.0
POISON = 5


def _run(engine, run_id: uuid.UUID, status: str = "Running", dagster_run_id: str | None = None) -> None:
    insert_import_run(engine, run_id, status=status, dagster_run_id=dagster_run_id)


def _request(engine, projects, run_id: uuid.UUID | None) -> None:
    with engine.begin() as conn:
        enqueue_recalc(
            conn,
            projects,
            RecalcReason.TALENT_SYNC,
            debounce_seconds=DEBOUNCE,
            cap_seconds=CAP,
            run_id=run_id,
        )


def _age(engine, minutes: int) -> None:
    """The queue's rows were first requested `minutes` ago and are due (held or not)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE chessboard.project_recalc_requests SET first_requested_at = now() - "
                "make_interval(mins => :m), due_at = now() - interval '1 second'"
            ),
            {"m": minutes},
        )


def _queue(engine) -> dict:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT project_id, import_run_id, due_at <= now() AS due, "
                "extract(epoch FROM due_at - now()) AS due_in FROM chessboard.project_recalc_requests"
            )
        ).mappings()
        return {row["project_id"]: dict(row) for row in rows}


def _gauge(engine, name: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                queries("recalc")[name], {"poison_attempts": POISON, "alive_seconds": 90.0}
            ).scalar_one()
        )


def _projects(engine, make_ctx) -> tuple[Tree, Tree]:
    ctx = make_ctx(run_id=None)
    first, second = Tree(), Tree()
    first.apply_parents(engine, ctx)
    second.apply_parents(engine, ctx)
    return first, second


def _key(tree: Tree) -> tuple[uuid.UUID, uuid.UUID]:
    return pid("project", tree.project), pid("developer", tree.developer)


def test_only_the_imports_own_requests_are_held(engine, make_ctx):
    first, second = _projects(engine, make_ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    _run(engine, RUN_ID)
    _request(engine, [_key(first), _key(second)], RUN_ID)  # the import touches both
    _request(engine, [_key(second)], None)  # the streaming sync touches the second one too
    _request(engine, [_key(second)], RUN_ID)  # a later page of the import: still not held
    queue = _queue(engine)
    assert queue[_key(first)[0]]["import_run_id"] == RUN_ID
    assert queue[_key(second)[0]]["import_run_id"] is None
    with engine.connect() as conn:
        status = queue_status(conn, POISON)
    assert (status.depth, status.held, status.due) == (2, 1, 0)  # the second waits for its debounce
    assert _gauge(engine, "held_count") == 1

    _age(engine, 10)  # both due long ago: the cap has passed for both
    with engine.connect() as conn:
        status = queue_status(conn, POISON)
    assert (status.held, status.due) == (1, 1)
    assert _gauge(engine, "due_backlog") == 1 and _gauge(engine, "held_count") == 1
    result = drain(engine)
    assert result.recalculated == 1  # the streaming sync's request, while the import still runs
    assert set(_queue(engine)) == {_key(first)[0]}


def test_a_released_request_is_due_by_the_cap_counted_from_its_first_request(engine, make_ctx):
    first, second = _projects(engine, make_ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    _run(engine, RUN_ID)
    _request(engine, [_key(first)], RUN_ID)
    _age(engine, 10)  # held for 10 minutes: longer than the cap
    _request(engine, [_key(second)], RUN_ID)  # first requested just now
    assert drain(engine).recalculated == 0  # held while the run runs
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE chessboard.talent_import_runs SET status = 'Completed'"))
        assert release_import_requests(conn, RUN_ID, debounce_seconds=DEBOUNCE, cap_seconds=CAP) == 2
    queue = _queue(engine)
    assert queue[_key(first)[0]]["due"]  # the cap passed while it was held: due at once
    assert 0 < queue[_key(second)[0]]["due_in"] <= DEBOUNCE  # a fresh request: the debounce
    assert drain(engine).recalculated == 1


def test_requests_of_a_run_ended_elsewhere_are_released(engine, make_ctx):
    first, second = _projects(engine, make_ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    gone, other = uuid.uuid4(), uuid.uuid4()
    _run(engine, gone, dagster_run_id="dagster-run-gone")
    _run(engine, other, status="Failed")
    _request(engine, [_key(first)], gone)
    _request(engine, [_key(second)], other)
    _age(engine, 10)
    with engine.begin() as conn:  # a run Failed without releasing: the sweep releases it
        assert release_ended_import_requests(conn, debounce_seconds=DEBOUNCE, cap_seconds=CAP) == 1
        # the Dagster run marked failed because its process is gone: released, its row still Running
        assert (
            release_dagster_run_requests(
                conn, ["dagster-run-gone"], debounce_seconds=DEBOUNCE, cap_seconds=CAP
            )
            == 1
        )
    assert all(row["import_run_id"] is None and row["due"] for row in _queue(engine).values())
    assert drain(engine).recalculated == 2


def test_a_dead_runs_requests_are_due_and_a_release_restarts_their_lag(engine, make_ctx):
    """A killed import stays Running (resumable) but holds nothing once its heartbeat is older
    than the 90-second rule: its requests are due backlog and the drain takes them. A release
    counts the lag (first_requested_at) from itself, not from the start of the import."""
    first, second = _projects(engine, make_ctx)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    dead, ended = uuid.uuid4(), uuid.uuid4()
    _run(engine, dead)
    _run(engine, ended)
    _request(engine, [_key(first)], dead)
    _request(engine, [_key(second)], ended)
    _age(engine, 120)  # a 2-hour import
    assert drain(engine).recalculated == 0  # both runs alive: held
    assert _gauge(engine, "held_count") == 2 and _gauge(engine, "due_backlog") == 0
    with engine.begin() as conn:  # every process of `dead` was SIGKILLed 91 s ago
        conn.execute(
            sa.text(
                "UPDATE chessboard.talent_import_runs SET started_at = now() - interval '2 hours', "
                "heartbeat_at = now() - interval '91 seconds' WHERE id = :id"
            ),
            {"id": dead},
        )
    assert _gauge(engine, "held_count") == 1 and _gauge(engine, "due_backlog") == 1
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE chessboard.talent_import_runs SET status = 'Completed' WHERE id = :id"),
            {"id": ended},
        )
        assert release_import_requests(conn, ended, debounce_seconds=DEBOUNCE, cap_seconds=CAP) == 1
        waited = conn.execute(
            sa.text(
                "SELECT extract(epoch FROM now() - first_requested_at) FROM chessboard.project_recalc_requests "
                "WHERE import_run_id IS NULL"
            )
        ).scalar_one()
    assert waited < 5  # lag from the release, not 2 hours
    assert drain(engine).recalculated == 2


def test_a_dry_run_bumps_no_version_on_equal_mapped_fields(engine, make_ctx):
    ctx = make_ctx(run_id=None)
    tree = Tree()
    tree.apply_parents(engine, ctx)
    objects = [tree.obj(f"1-1-{i}") for i in range(3)]
    apply(engine, "propertyObject", objects, ctx)
    # newer versions: the first two with equal mapped fields, the third with a new price
    newer = [{**o, "version": 5} for o in objects]
    newer[2] = {**newer[2], "price": "1.00"}
    state = DryRunState()
    dry = apply(engine, "propertyObject", newer, make_ctx(dry_run=True, dry_run_state=state))
    seen = state.seen["propertyObject"]
    assert [seen[o["id"]].version for o in objects] == [1, 1, 2]
    assert dry.touched_projects == {_key(tree)}
    equal_only = apply(
        engine, "propertyObject", newer[:2], make_ctx(dry_run=True, dry_run_state=DryRunState())
    )
    assert equal_only.touched_projects == set()
    real = apply(engine, "propertyObject", newer, ctx)
    assert (real.applied, real.skipped) == (dry.applied, dry.skipped)
    versions = one(engine, "SELECT array_agg(version ORDER BY number) AS v FROM chessboard.property_objects")[
        "v"
    ]
    assert versions == [1, 1, 2]  # what the DryRun said

"""The debounced enqueue (docs/project-aggregates-recalc.md#queue-and-debounce): SQL agrees with
the pure arithmetic."""

from __future__ import annotations

import uuid
from datetime import timedelta

import sqlalchemy as sa

from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from tests.support.debounce import next_due_at


def _row(conn, project_id):
    return (
        conn.execute(
            sa.text(
                "SELECT *, now() AS db_now FROM chessboard.project_recalc_requests WHERE project_id = :p"
            ),
            {"p": project_id},
        )
        .mappings()
        .one()
    )


def test_new_then_coalesced_request(engine):
    project, tenant = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as conn:
        enqueue_recalc(
            conn, [(project, tenant)], RecalcReason.TALENT_SYNC, debounce_seconds=30, cap_seconds=300
        )
        first = _row(conn, project)
    assert first["requested_count"] == 1
    assert first["due_at"] == next_due_at(
        first["db_now"], None, timedelta(seconds=30), timedelta(seconds=300)
    )
    with engine.begin() as conn:
        enqueue_recalc(conn, [(project, tenant)], RecalcReason.CRUD, debounce_seconds=30, cap_seconds=300)
        second = _row(conn, project)
    assert second["requested_count"] == 2
    assert second["last_reason"] == "Crud"
    assert second["first_requested_at"] == first["first_requested_at"]
    assert second["due_at"] == next_due_at(
        second["db_now"], first["first_requested_at"], timedelta(seconds=30), timedelta(seconds=300)
    )


def test_cap_bounds_the_due_time(engine):
    project, tenant = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as conn:
        enqueue_recalc(
            conn, [(project, tenant)], RecalcReason.TALENT_SYNC, debounce_seconds=30, cap_seconds=300
        )
        conn.execute(
            sa.text(
                "UPDATE chessboard.project_recalc_requests "
                "SET first_requested_at = now() - interval '290 seconds' WHERE project_id = :p"
            ),
            {"p": project},
        )
    with engine.begin() as conn:
        enqueue_recalc(
            conn, [(project, tenant)], RecalcReason.TALENT_SYNC, debounce_seconds=30, cap_seconds=300
        )
        row = _row(conn, project)
    assert row["due_at"] == row["first_requested_at"] + timedelta(seconds=300)


def test_force_and_duplicates_in_one_call(engine):
    project, tenant = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as conn:
        n = enqueue_recalc(
            conn,
            [(project, tenant), (project, tenant)],
            RecalcReason.CRUD,
            debounce_seconds=30,
            cap_seconds=300,
            force=True,
        )
        row = _row(conn, project)
    assert n == 1
    assert row["requested_count"] == 1
    assert row["due_at"] == row["db_now"]

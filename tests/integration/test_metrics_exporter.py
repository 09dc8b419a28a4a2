"""`metrics serve` exposes the multi-process counters and the store gauges."""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from prometheus_client import generate_latest

from pin_chessboard_pipelines.observability import metrics
from pin_chessboard_pipelines.observability.exporter import build_registry


def _value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exposed")


def test_store_gauges_and_counters(db_url, engine):
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO chessboard.project_recalc_requests "
                "(project_id, tenant_id, due_at, first_requested_at, last_reason, attempt_count) "
                "VALUES (:p1, :t, now() - interval '1 minute', now(), 'Crud', 0), "
                "       (:p2, :t, now() + interval '1 hour', now(), 'Crud', 7)"
            ),
            {"p1": uuid.uuid4(), "p2": uuid.uuid4(), "t": uuid.uuid4()},
        )
    metrics.RECALC_RUNS.labels("success").inc(3)
    text = generate_latest(build_registry(db_url, poison_attempts=5)).decode()
    assert _value(text, "chessboard_store_up") == 1
    assert _value(text, "chessboard_recalc_queue_depth") == 2
    assert _value(text, "chessboard_recalc_due_backlog") == 1
    assert _value(text, "chessboard_recalc_poison_rows") == 1
    assert _value(text, "chessboard_outbox_backlog") == 0
    assert 'chessboard_recalc_runs_total{result="success"}' in text


def test_store_down_is_reported_not_raised():
    text = generate_latest(build_registry("postgresql://nobody@127.0.0.1:1/none", poison_attempts=5)).decode()
    assert _value(text, "chessboard_store_up") == 0

"""The relay floor: rows below it are published; it never passes a row whose transaction is still
open, whatever ids later transactions committed meanwhile."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from pin_chessboard_pipelines.events.fast_path import relay_pending
from pin_chessboard_pipelines.events.outbox import OutboxEvent, pending_summary, write_outbox
from pin_chessboard_pipelines.events.payloads import PROPERTY_OBJECT_UPSERTED, topic_of
from pin_chessboard_pipelines.events.reference_consumer import read_events


def _event() -> OutboxEvent:
    key = str(uuid.uuid4())
    return OutboxEvent(PROPERTY_OBJECT_UPSERTED, key, {"id": key, "version": 1})


def _floor(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT floor_id FROM chessboard.outbox_relay_floor")).scalar_one()


def _row(engine, message_id: uuid.UUID) -> tuple[int, bool]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(
                sa.text(
                    "SELECT id, published_at IS NOT NULL FROM chessboard.outbox_messages WHERE message_id = :m"
                ),
                {"m": message_id},
            ).one()
        )


def test_a_row_committed_after_later_ids_were_published_is_relayed(engine, kafka_bootstrap):
    late, early = _event(), _event()
    with engine.connect() as open_conn:
        open_tx = open_conn.begin()
        write_outbox(open_conn, [late])  # draws the lower id, commits last
        with engine.begin() as conn:
            write_outbox(conn, [early])
        for _ in range(3):  # the floor gets every chance to move
            relay_pending(engine, kafka_bootstrap)
        late_id = open_conn.execute(
            sa.text("SELECT id FROM chessboard.outbox_messages WHERE message_id = :m"), {"m": late.message_id}
        ).scalar_one()
        early_id, early_published = _row(engine, early.message_id)
        assert late_id < early_id and early_published
        assert _floor(engine) <= late_id
        open_tx.commit()

    assert pending_summary(engine)["backlog"] == 1
    assert relay_pending(engine, kafka_bootstrap).published == 1
    assert _row(engine, late.message_id) == (late_id, True)
    got = read_events(
        kafka_bootstrap,
        [topic_of(PROPERTY_OBJECT_UPSERTED)],
        until=lambda events: str(late.message_id) in {e.message_id for e in events},
        timeout=30,
    )
    assert str(late.message_id) in {e.message_id for e in got}
    relay_pending(engine, kafka_bootstrap)
    relay_pending(engine, kafka_bootstrap)
    assert _floor(engine) > early_id


def test_the_floor_moves_past_the_ids_of_a_rolled_back_writer(engine, kafka_bootstrap):
    with engine.connect() as conn:
        rolled_back = conn.begin()
        write_outbox(conn, [_event()])
        rolled_back.rollback()
    kept = _event()
    with engine.begin() as conn:
        write_outbox(conn, [kept])
    for _ in range(3):
        relay_pending(engine, kafka_bootstrap)
    kept_id, published = _row(engine, kept.message_id)
    assert published and _floor(engine) > kept_id
    assert pending_summary(engine)["backlog"] == 0

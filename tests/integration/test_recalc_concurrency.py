"""Two drains at once, and a request arriving mid-drain (docs/project-aggregates-recalc.md#drain)."""

from __future__ import annotations

import threading

import sqlalchemy as sa

from pin_chessboard_pipelines.events.payloads import PROJECT_UPSERTED, topic_of
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from tests.support.polling import wait_until
from tests.support.recalc_data import StoreBuilder, outbox, queue, standard_project


def _slow_project_updates(conn, seconds: float) -> None:
    """Each project write takes `seconds`, so concurrent drains really overlap."""
    conn.execute(
        sa.text(
            "CREATE FUNCTION chessboard.test_slow() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$"
        )
    )
    conn.execute(
        sa.text(
            "CREATE TRIGGER test_slow BEFORE UPDATE ON chessboard.projects "
            "FOR EACH ROW EXECUTE FUNCTION chessboard.test_slow()"
        )
    )


def _in_threads(n: int, fn):
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            results[i] = fn(i)
        except BaseException as error:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return results


def _project_events(conn) -> list[str]:
    return [m["message_key"] for m in outbox(conn) if m["topic"] == topic_of(PROJECT_UPSERTED)]


def test_two_workers_on_one_row_recalculate_once(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project)
        _slow_project_updates(conn, 0.3)
    results = _in_threads(2, lambda _: drain(engine))
    assert sorted(r.recalculated for r in results) == [0, 1]
    assert sum(r.failed for r in results) == 0
    with engine.connect() as conn:
        assert _project_events(conn) == [str(project.id)]
        assert queue(conn) == {}


def test_two_workers_share_a_backlog_without_overlap(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        projects = [standard_project(b) for _ in range(12)]
        for p in projects:
            b.request(p)
        _slow_project_updates(conn, 0.02)
    results = _in_threads(2, lambda _: drain(engine, batch_size=5))
    assert sum(r.recalculated for r in results) == len(projects)
    assert all(r.recalculated > 0 for r in results)  # both took part
    with engine.connect() as conn:
        events = _project_events(conn)
        assert sorted(events) == sorted(str(p.id) for p in projects)  # each project exactly once
        assert queue(conn) == {}


def test_request_during_drain_waits_and_inserts_a_fresh_row(engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project, requested_count=7)
        _slow_project_updates(conn, 0.5)

    drained = threading.Event()

    def drain_then_flag():
        result = drain(engine)
        drained.set()
        return result

    drainer = threading.Thread(target=drain_then_flag)
    drainer.start()

    def drain_holds_the_row() -> bool:
        with engine.connect() as conn:
            return bool(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                        "WHERE c.relname = 'projects' AND l.mode = 'RowExclusiveLock' "
                        "AND l.pid <> pg_backend_pid()"
                    )
                ).scalar()
            )

    wait_until(drain_holds_the_row, 60, "the drain's lock on the project")  # it holds the queue row
    with engine.begin() as conn:
        enqueue_recalc(
            conn,
            [(project.id, project.tenant_id)],
            RecalcReason.PROPERTY_OBJECT_UPSERTED,
            debounce_seconds=30,
            cap_seconds=300,
        )
    drainer.join(timeout=60)
    assert drained.is_set()
    with engine.connect() as conn:
        row = queue(conn)[project.id]
    # the request waited for the drain's commit, was not lost and did not merge into the drained row
    # (RequestedCount 7 + 1 had it not waited)
    assert row["requested_count"] == 1
    assert row["last_reason"] == "PropertyObjectUpserted"

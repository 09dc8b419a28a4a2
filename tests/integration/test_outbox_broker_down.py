"""Broker outages in the middle of publishing: nothing is lost, duplicates keep their messageId.

Each test runs its own Tansu broker so it can stop it:
- frozen (SIGSTOP) and continued (SIGCONT): the broker keeps what it stored, so the whole topic
  can be checked afterwards against the outbox;
- killed and started again: Tansu's memory storage comes back empty, so the relay has to recreate
  the topics; what was not acknowledged before the kill must all arrive on the new broker.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections import defaultdict

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.events.outbox import OutboxEvent, write_outbox
from pin_chessboard_pipelines.events.payloads import PROPERTY_OBJECT_UPSERTED, topic_of
from pin_chessboard_pipelines.events.reference_consumer import EventProjection, read_events
from pin_chessboard_pipelines.events.relay import OutboxRelay
from pin_chessboard_pipelines.events.topics_admin import contract_topics, topic_partitions
from pin_chessboard_pipelines.retry import FailurePolicy
from pin_chessboard_pipelines.runtime.embedded import free_port, start_tansu
from pin_chessboard_pipelines.store.tables import outbox_messages
from tests.support.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

TOPIC = topic_of(PROPERTY_OBJECT_UPSERTED)
KEYS, VERSIONS = 30, 60  # 1800 rows
LOAD_MARGIN = 15.0  # seconds a loaded machine (load average 5 on 2 cores) may add to a wait


@pytest.fixture
def own_broker():
    """(bootstrap, controls) of a broker only this test uses."""
    port = free_port()
    procs = [start_tansu(port)]

    class Controls:
        def freeze(self) -> None:
            os.kill(procs[-1].pid, signal.SIGSTOP)

        def resume(self) -> None:
            os.kill(procs[-1].pid, signal.SIGCONT)

        def kill(self) -> None:
            procs[-1].kill()
            procs[-1].wait()

        def restart(self) -> None:
            procs.append(start_tansu(port))

    yield f"127.0.0.1:{port}", Controls()
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout=10)


def write_rows(engine, versions: int = VERSIONS) -> dict[str, tuple[str, int]]:
    """KEYS x versions rows, versions interleaved across keys; messageId -> (key, version)."""
    keys = [str(uuid.uuid4()) for _ in range(KEYS)]
    written = {}
    with engine.begin() as conn:
        for version in range(1, versions + 1):
            events = [OutboxEvent(PROPERTY_OBJECT_UPSERTED, k, {"id": k, "version": version}) for k in keys]
            write_outbox(conn, events)
            written.update({str(e.message_id): (e.aggregate_id, version) for e in events})
    return written


def published_ids(engine) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(outbox_messages.c.message_id).where(outbox_messages.c.published_at.is_not(None))
        )
        return {str(r[0]) for r in rows}


def relay_for(engine, bootstrap) -> OutboxRelay:
    return OutboxRelay(
        engine,
        bootstrap,
        batch_size=100,
        message_timeout_ms=1500,
        policy=FailurePolicy(initial=0.1, cap=0.5, attempts=1),
    )


def assert_delivered(events, written: dict[str, tuple[str, int]], expected_ids: set[str]) -> None:
    """Every expected messageId arrived; copies of one messageId are identical; per key, first
    deliveries are in commit order."""
    by_id = defaultdict(list)
    for e in events:
        by_id[e.message_id].append(e)
    assert set(by_id) == expected_ids
    for message_id, copies in by_id.items():
        key, version = written[message_id]
        assert all((c.key, c.version, c.payload) == (key, version, copies[0].payload) for c in copies)
    first_seen: dict[str, list[int]] = defaultdict(list)
    seen: set[str] = set()
    for e in sorted(events, key=lambda e: (e.partition, e.offset)):
        if e.message_id not in seen:
            seen.add(e.message_id)
            first_seen[e.key].append(e.version)
    for versions in first_seen.values():
        assert versions == sorted(versions)


def test_frozen_broker_keeps_rows_pending_and_everything_arrives_after_it_resumes(engine, own_broker):
    bootstrap, broker = own_broker
    written = write_rows(engine)
    relay = relay_for(engine, bootstrap)
    frozen = threading.Event()

    def freeze_after_the_first_batches() -> bool:
        """Asked by the relay before each batch: the broker freezes between two batches once 300
        rows are published, so the rest of the rows meet it frozen. (Frozen from the test's thread
        instead, it could come after the relay had published all the rows and returned: a busy
        machine delays that thread longer than the relay takes for the remaining batches.)"""
        if not frozen.is_set() and relay.published_total >= 300:
            broker.freeze()
            frozen.set()
        return False

    outcome = {}
    worker = threading.Thread(
        target=lambda: outcome.update(
            result=relay.relay_pending(
                until_empty=True, max_seconds=90, should_stop=freeze_after_the_first_batches
            )
        )
    )
    # each failed attempt against the frozen broker ends within the relay's own bound (its pause,
    # the topics' requests, the flush: all from its timeouts), plus a margin for a busy machine
    attempt = relay.longest_failed_attempt_seconds
    worker.start()
    try:
        wait_until(frozen.is_set, what="the broker frozen after the first batches")
        wait_until(
            lambda: relay.failed_attempts_total >= 1,
            timeout=attempt + LOAD_MARGIN,
            what="the relay to notice",
        )
        stuck = published_ids(engine)
        wait_until(
            lambda: relay.failed_attempts_total >= 3,
            timeout=2 * attempt + LOAD_MARGIN,
            what="retries while frozen",
        )
        assert published_ids(engine) == stuck  # nothing unacknowledged was marked
        assert len(stuck) < len(written)
    finally:
        broker.resume()
    worker.join(timeout=120)
    relay.close()

    result = outcome["result"]
    assert result.failed_attempts >= 3 and not result.stopped_early
    assert published_ids(engine) == set(written)
    events = wait_until(
        lambda: (lambda evs: evs if {e.message_id for e in evs} >= set(written) else None)(
            read_events(bootstrap, [TOPIC])
        ),
        what="every message on the broker",
    )
    assert_delivered(events, written, set(written))
    projection = EventProjection().apply_all(sorted(events, key=lambda e: (e.partition, e.offset)))
    assert projection.counts["applied"] == len(written)
    assert all(state["version"] == VERSIONS for state in projection.state.values())


def test_killed_broker_restarts_empty_and_gets_every_unacknowledged_row(engine, own_broker):
    bootstrap, broker = own_broker
    # 18,000 rows: the relay (about 3,000 rows/s at 100 a batch) is still busy when the broker dies
    written = write_rows(engine, versions=600)
    relay = relay_for(engine, bootstrap)
    outcome = {}
    worker = threading.Thread(target=lambda: outcome.update(result=relay.relay_pending()))
    worker.start()
    wait_until(lambda: len(published_ids(engine)) >= 300, what="the first batches")
    broker.kill()
    worker.join(timeout=60)
    assert outcome["result"].failed_attempts == 1  # no deadline: the call ends at the first failure
    before_restart = published_ids(engine)
    assert 300 <= len(before_restart) < len(written)

    while_down = relay.relay_pending()  # a sweep while the broker is down
    assert (while_down.published, while_down.failed_attempts) == (0, 1)
    assert published_ids(engine) == before_restart

    broker.restart()
    after = relay.relay_pending(until_empty=True, max_seconds=60)
    relay.close()

    assert after.published == len(written) - len(before_restart)
    assert published_ids(engine) == set(written)
    partitions = topic_partitions(bootstrap)
    assert {t: partitions.get(t) for t in contract_topics()} == contract_topics()  # recreated as contracted
    missing = set(written) - before_restart
    events = wait_until(
        lambda: (lambda evs: evs if {e.message_id for e in evs} >= missing else None)(
            read_events(bootstrap, [TOPIC])
        ),
        what="the unacknowledged rows on the new broker",
    )
    assert_delivered(events, written, missing)

"""The streaming consumer of the Talent topics against real PostgreSQL and a Tansu broker."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.entities import ENTITIES, PROPERTY_OBJECT, pin_id
from pin_chessboard_pipelines.errors import IMPORT_SOURCE_UNAVAILABLE, Refused, SyncFailed
from pin_chessboard_pipelines.events.payloads import PROPERTY_OBJECT_UPSERTED, topic_of
from pin_chessboard_pipelines.events.reference_consumer import read_events
from pin_chessboard_pipelines.events.topics_admin import end_offsets, probe_consumer
from pin_chessboard_pipelines.replica.apply import STREAMING_RUN_ID
from pin_chessboard_pipelines.stopper import StopReason
from pin_chessboard_pipelines.store.tables import REPLICA_TABLES
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset
from pin_chessboard_pipelines.talent_sync import SYNC_LOCK_HELD, TalentSync, sync_policy
from tests.support.contracts import assert_dead_letter_headers_valid
from tests.support.polling import wait_until
from tests.support.replica import refuse_developer
from tests.support.talent_kafka import (
    committed_offsets,
    count,
    dead_letters,
    poisoned_objects,
    produce,
    reset_group,
)

# every event written meets its schema (tests/support/contracts.py)
pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.usefixtures("outbox_contract")]

SPEC = DatasetSpec(
    developers=2,
    projects_per_developer=2,
    buildings_per_project=2,
    layout_groups_per_project=2,
    layouts_per_project=3,
    objects_per_project=20,
    deleted_every=9,
    unknown_enum_every=7,
    poison_every=13,
)
OBJECTS = dataset.count(SPEC, "property-objects")
POISONED = poisoned_objects(SPEC)


def sync(engine, bootstrap, **options):
    options.setdefault("batch_size", 40)  # several poll batches, topics interleaved
    return TalentSync(engine, bootstrap, poll_timeout=0.1, **options).run(until_idle=True, max_seconds=60)


def rows(engine, table: str) -> int:
    return count(engine, f"SELECT count(*) FROM chessboard.{table}")


def test_sync_applies_parents_first_commits_offsets_and_deletes_on_tombstones(engine, broker):
    published = publish_dataset(SPEC, broker)

    first = sync(engine, broker)

    assert first.stopped is StopReason.DONE and first.messages == sum(published.values())
    for stage, table in zip(ENTITIES, REPLICA_TABLES, strict=True):
        expected = dataset.count(SPEC, stage.collection) - (
            len(POISONED) if table.name == "property_objects" else 0
        )
        assert rows(engine, table.name) == expected
    # the stage barrier: only the poison items are quarantined, no child missed its parent
    assert first.failed == len(POISONED) == rows(engine, "talent_import_failed_items")
    assert count(
        engine,
        "SELECT count(*) FROM chessboard.talent_import_failed_items WHERE run_id = :r",
        r=STREAMING_RUN_ID,
    ) == len(POISONED)
    committed = committed_offsets(broker)
    probe = probe_consumer(broker)
    try:
        ends = end_offsets(probe, committed.keys())
    finally:
        probe.close()
    assert {k: v for k, v in committed.items() if v >= 0} == {
        k: end for k, (_, end) in ends.items() if end > 0
    }
    # the fast path put the events on Kafka
    assert count(engine, "SELECT count(*) FROM chessboard.outbox_messages WHERE published_at IS NULL") == 0
    upserted = read_events(broker, [topic_of(PROPERTY_OBJECT_UPSERTED)])
    assert len(upserted) == OBJECTS - len(POISONED)
    events = rows(engine, "outbox_messages")

    assert sync(engine, broker).messages == 0  # nothing new since the committed offsets

    victim = dataset.item(SPEC, "property-objects", 3)
    object_id = pin_id("propertyObject", victim["id"])
    version = count(engine, "SELECT version FROM chessboard.property_objects WHERE id = :id", id=object_id)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM chessboard.project_recalc_requests"))
    produce(broker, PROPERTY_OBJECT.topic, victim["id"], None)
    produce(broker, PROPERTY_OBJECT.topic, "00000000-0000-4000-8000-000000000001", None)  # unknown: no-op

    deleted = sync(engine, broker)

    assert (deleted.messages, deleted.tombstones, deleted.applied, deleted.skipped) == (2, 2, 1, 1)
    with engine.connect() as conn:
        row = conn.execute(
            sa.text("SELECT deleted_at, version, project_id FROM chessboard.property_objects WHERE id = :id"),
            {"id": object_id},
        ).one()
        payload = conn.execute(
            sa.text(
                "SELECT payload FROM chessboard.outbox_messages WHERE message_key = :id ORDER BY id DESC LIMIT 1"
            ),
            {"id": str(object_id)},
        ).scalar_one()
        recalc = (
            conn.execute(sa.text("SELECT project_id FROM chessboard.project_recalc_requests")).scalars().all()
        )
    assert row.deleted_at is not None and row.version == version + 1
    assert payload["deletedAt"] is not None and payload["version"] == version + 1
    assert recalc == [row.project_id]  # the project's aggregates are requested again

    reset_group(broker)  # the group back to offset 0
    replayed = sync(engine, broker)
    assert replayed.messages == first.messages + 2
    assert replayed.applied == 0 and replayed.failed == len(POISONED)  # version guard; poison stays poison
    assert rows(engine, "outbox_messages") == events + 1  # only the tombstone's event was added


def test_offsets_are_committed_only_after_the_transaction(engine, broker):
    publish_dataset(SPEC, broker)
    with engine.begin() as conn:  # every property object insert fails
        conn.execute(
            sa.text("ALTER TABLE chessboard.property_objects ADD CONSTRAINT test_no_rows CHECK (false)")
        )

    with pytest.raises(SyncFailed):
        sync(engine, broker, policy=sync_policy(attempts=2, initial=0.05))

    offsets = committed_offsets(broker)
    assert all(offsets[(PROPERTY_OBJECT.topic, p)] < 0 for p in range(PROPERTY_OBJECT.partitions))
    assert rows(engine, "property_objects") == 0
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE chessboard.property_objects DROP CONSTRAINT test_no_rows"))
    result = sync(engine, broker)
    assert rows(engine, "property_objects") == OBJECTS - len(POISONED)
    assert result.stages["PropertyObjects"]["planned"] == OBJECTS


def test_one_consumer_at_a_time_and_missing_topics_are_refused(engine, broker):
    with pytest.raises(Refused) as missing:
        sync(engine, broker)
    assert missing.value.code == IMPORT_SOURCE_UNAVAILABLE and "missing" in str(missing.value)

    publish_dataset(DatasetSpec(), broker)
    stop = threading.Event()
    running = TalentSync(engine, broker, poll_timeout=0.1)
    worker = threading.Thread(target=lambda: running.run(should_stop=stop.is_set))
    worker.start()
    try:
        wait_until(lambda: rows(engine, "property_objects") > 0, what="the first consumer")
        with pytest.raises(Refused) as second:
            sync(engine, broker)
        assert second.value.code == SYNC_LOCK_HELD
        with pytest.raises(Refused) as replay:  # the group's offsets belong to the running consumer
            reset_group(broker, engine)
        assert replay.value.code == IMPORT_SOURCE_UNAVAILABLE and "talent-sync is running" in str(
            replay.value
        )
    finally:
        stop.set()
        worker.join(timeout=30)
    reset_group(broker)  # free again


def test_a_poison_message_goes_to_the_dead_letter_topic_while_the_messages_after_it_apply(engine, broker):
    """A developer whose write keeps failing (a trigger of the test's own refuses it, not a
    validation error) no longer blocks its partition: after the batch's tries it goes, as it was, to
    `pin-chessboard-talent-sync.dlq` with its error and origin in headers; the developers after it
    on the same partition apply, the offsets move past it, the counter counts it. Once the cause is
    fixed, `replay_dead_letters` applies it."""
    from confluent_kafka import Producer

    from pin_chessboard_pipelines.events.dead_letters import read_dead_letter, replay_dead_letters
    from pin_chessboard_pipelines.talent.simulator.publish import ensure_topics
    from tests.support.metrics import sample_value

    developers = ENTITIES[0]
    ensure_topics(broker)
    items = [{"id": str(uuid.uuid4()), "version": 1, "name": f"ГК Тест {i}"} for i in range(4)]
    poison = items[1]["id"]
    with engine.begin() as conn:
        refuse_developer(conn, poison)
    producer = Producer({"bootstrap.servers": broker})
    for item in items:  # one partition: the poison is the second message, two come after it
        producer.produce(
            developers.topic, key=item["id"].encode(), value=json.dumps(item).encode(), partition=0
        )
    assert producer.flush(10) == 0
    url = engine.url.render_as_string(hide_password=False)
    counted = sample_value(
        url, "chessboard_consumer_dead_letters_total", consumer="talent-sync", topic=developers.topic
    )

    result = sync(engine, broker, policy=sync_policy(attempts=2, initial=0.05))

    assert result.stopped is StopReason.DONE and result.dead_letters == 1
    with engine.connect() as conn:
        stored = set(
            conn.execute(sa.text("SELECT external_talent_id::text FROM chessboard.developers")).scalars()
        )
    assert stored == {item["id"] for item in items} - {poison}
    assert committed_offsets(broker)[(developers.topic, 0)] == len(items)  # past the poison
    [letter] = dead_letters(broker)
    headers = {name: value.decode() for name, value in letter.headers()}
    assert letter.key() == poison.encode() and json.loads(letter.value()) == items[1]
    assert (
        headers["pin-dlq-origin-topic"],
        headers["pin-dlq-origin-partition"],
        headers["pin-dlq-origin-offset"],
    ) == (
        developers.topic,
        "0",
        "1",
    )
    assert (
        f"developer {poison} refused" in headers["pin-dlq-error"]
        and headers["pin-dlq-consumer"] == "talent-sync"
    )
    assert headers["pin-dlq-attempts"] == "3"  # the batch's two tries, then its own
    assert_dead_letter_headers_valid(headers)
    assert read_dead_letter(letter.key(), letter.value(), letter.headers(), 0).origin.offset == 1
    assert (
        sample_value(
            url, "chessboard_consumer_dead_letters_total", consumer="talent-sync", topic=developers.topic
        )
        == counted + 1
    )

    still = replay_dead_letters(engine, broker, TalentSync(engine, broker))  # the cause is not fixed
    assert (still.read, still.applied, still.failed_again) == (1, 0, 1)
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TRIGGER refuse_one_developer ON chessboard.developers"))
    fixed = replay_dead_letters(engine, broker, TalentSync(engine, broker))
    assert (fixed.read, fixed.applied, fixed.failed_again) == (1, 1, 0)
    assert (
        count(engine, "SELECT count(*) FROM chessboard.developers WHERE external_talent_id = :id", id=poison)
        == 1
    )
    assert replay_dead_letters(engine, broker, TalentSync(engine, broker)).read == 0  # nothing left

"""Mode = TopicReplay of the talent initial import: the import's runner over TopicReplaySource,
against real PostgreSQL and a Tansu broker of the test's own."""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from pin_chessboard_pipelines.entities import ENTITIES, PROPERTY_OBJECT, pin_id
from pin_chessboard_pipelines.errors import IMPORT_SOURCE_UNAVAILABLE, Refused
from pin_chessboard_pipelines.replica.topic_items import apply_topic_items
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import ensure_topics, publish_dataset
from pin_chessboard_pipelines.talent.topic_reader import TOMBSTONE
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP
from pin_chessboard_pipelines.talent_import.request import Scope, build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources.topic_replay import TopicReplaySource, parse_cursor
from tests.support.talent_kafka import committed_offsets, count, poisoned_objects, produce

# every event written meets its schema (tests/support/contracts.py)
pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.usefixtures("outbox_contract")]

SPEC = DatasetSpec(
    developers=2,
    projects_per_developer=2,
    buildings_per_project=2,
    layout_groups_per_project=2,
    layouts_per_project=3,
    objects_per_project=15,
    deleted_every=8,
    poison_every=11,
)
OBJECTS = dataset.count(SPEC, "property-objects")
POISONED = poisoned_objects(SPEC)


def replay(db_url, engine, bootstrap, **request):
    request.setdefault("page_size", 7)  # several pages per partition
    source = TopicReplaySource(bootstrap, engine=engine, reset_offsets=not request.get("dry_run", False))
    return ImportSession(
        db_url,
        build_request(mode="TopicReplay", **request),
        source,
        options=ImportOptions(debounce_seconds=30, cap_seconds=300, retry_seconds=0.05),
        apply=source.apply,
    ).run_here()


def test_a_refused_replay_touches_no_offset(db_url, engine, broker):
    """The reset happens only once the import lock is held: a refused import moved nothing."""
    from pin_chessboard_pipelines.talent_import.lock import ImportLock

    publish_dataset(SPEC, broker)
    admin = AdminClient({"bootstrap.servers": broker})
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(CONSUMER_GROUP, [TopicPartition(PROPERTY_OBJECT.topic, 0, 3)])]
    )[CONSUMER_GROUP].result(10)
    with ImportLock(db_url) as other:
        other.acquire(0)
        source = TopicReplaySource(broker, engine=engine)
        with pytest.raises(Refused):
            ImportSession(
                db_url,
                build_request(mode="TopicReplay", page_size=7),
                source,
                options=ImportOptions(lock_timeout_seconds=0.2),
                apply=source.apply,
            ).run_here()
    assert committed_offsets(broker)[(PROPERTY_OBJECT.topic, 0)] == 3


def rows(engine, table: str) -> int:
    return count(engine, f"SELECT count(*) FROM chessboard.{table}")


def test_replay_of_empty_topics_completes_with_zero(db_url, engine, broker):
    ensure_topics(broker)
    result = replay(db_url, engine, broker)
    assert result.status == "Completed" and result.mode == "TopicReplay"
    assert result.totals.planned == 0 and result.totals.applied == 0
    assert rows(engine, "talent_import_pages") == len(ENTITIES)  # one closing page per stage
    assert rows(engine, "outbox_messages") == 0


def test_replay_resets_the_group_applies_parents_first_and_a_second_replay_is_a_no_op(db_url, engine, broker):
    publish_dataset(SPEC, broker)
    victim = dataset.item(SPEC, "property-objects", 4)
    produce(broker, PROPERTY_OBJECT.topic, victim["id"], None)  # deleted in Talent after the snapshot
    admin = AdminClient({"bootstrap.servers": broker})
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(CONSUMER_GROUP, [TopicPartition(PROPERTY_OBJECT.topic, 0, 3)])]
    )[CONSUMER_GROUP].result(10)

    first = replay(db_url, engine, broker, workers=1)

    assert first.status == "Completed"
    # the handover: the group was reset, and it now stands where the replay ended on every partition
    # it walked, so talent-sync neither re-applies nor re-quarantines what the replay did
    committed = committed_offsets(broker)
    for stage in ENTITIES:  # offsets start at 0 and nothing is compacted: the sum is the count
        published = dataset.count(SPEC, stage.collection) + (1 if stage is PROPERTY_OBJECT else 0)
        assert sum(max(0, o) for (t, _), o in committed.items() if t == stage.topic) == published
    for stage in ENTITIES:
        planned = dataset.count(SPEC, stage.collection) + (1 if stage is PROPERTY_OBJECT else 0)
        assert first.stages[stage.stage].planned == planned
    objects = first.stages["PropertyObjects"]
    assert objects.failed == len(POISONED) == rows(engine, "talent_import_failed_items")
    assert objects.applied == OBJECTS - len(POISONED) + 1  # + the tombstone's soft delete
    deleted = count(
        engine,
        "SELECT deleted_at IS NOT NULL FROM chessboard.property_objects WHERE id = :id",
        id=pin_id("propertyObject", victim["id"]),
    )
    assert deleted is True
    events = rows(engine, "outbox_messages")

    second = replay(db_url, engine, broker)

    assert second.status == "Completed"
    assert second.totals.applied == 0
    assert second.totals.skipped == second.totals.planned - second.totals.failed
    assert second.stages["PropertyObjects"].failed == len(POISONED)  # poison is quarantined again
    assert rows(engine, "outbox_messages") == events


def test_scoped_replay_keeps_the_developers_tree(db_url, engine, broker):
    publish_dataset(SPEC, broker)
    developer = dataset.item(SPEC, "developers", 1)["id"]
    result = replay(db_url, engine, broker, developer_ids=[developer])
    assert result.status == "Completed"
    scoped = dataset.count(SPEC, "property-objects", developer_id=developer)
    assert rows(engine, "developers") == 1
    assert rows(engine, "projects") == dataset.count(SPEC, "projects", developer_id=developer)
    poisoned = [
        i for i in dataset.index_range(SPEC, "property-objects", developer_id=developer) if i in set(POISONED)
    ]
    assert rows(engine, "property_objects") == scoped - len(poisoned)
    assert result.stages["PropertyObjects"].planned == scoped


def test_dry_run_counts_like_a_real_run_and_leaves_the_group_alone(db_url, engine, broker):
    publish_dataset(SPEC, broker)
    admin = AdminClient({"bootstrap.servers": broker})
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(CONSUMER_GROUP, [TopicPartition(PROPERTY_OBJECT.topic, 0, 3)])]
    )[CONSUMER_GROUP].result(10)

    result = replay(db_url, engine, broker, dry_run=True)

    assert result.status == "Completed" and result.dry_run
    assert result.stages["PropertyObjects"].applied == OBJECTS - len(POISONED)
    assert result.stages["PropertyObjects"].failed == len(POISONED)
    for table in ("developers", "property_objects", "outbox_messages", "talent_import_failed_items"):
        assert rows(engine, table) == 0
    assert committed_offsets(broker)[(PROPERTY_OBJECT.topic, 0)] == 3


def test_a_page_read_again_by_its_cursor_holds_the_walks_items(broker):
    publish_dataset(SPEC, broker)
    produce(broker, PROPERTY_OBJECT.topic, dataset.item(SPEC, "property-objects", 0)["id"], None)
    source = TopicReplaySource(broker)
    try:
        pages = list(source.plan_pages(PROPERTY_OBJECT, Scope(), page_size=4))
        assert sum(len(p.items) for p in pages) == OBJECTS + 1
        assert sum(1 for p in pages for i in p.items if i.get(TOMBSTONE)) == 1
        for page, following in zip(pages, pages[1:], strict=False):
            assert page.next_cursor == following.cursor
            partition, start, end = parse_cursor(page.cursor)
            assert 0 < min(start + 4, end) - start <= 4
        assert pages[-1].next_cursor is None
        for page in pages:
            assert source.fetch_page(PROPERTY_OBJECT, page.cursor, Scope(), page_size=4) == page.items
        resumed = list(source.plan_pages(PROPERTY_OBJECT, Scope(), page_size=4, start=pages[3].cursor))
        assert [p.cursor for p in resumed] == [p.cursor for p in pages[3:]]
        developers = source.developer_ids()
        assert developers == [dataset.item(SPEC, "developers", i)["id"] for i in range(2)]
        project = dataset.item(SPEC, "projects", 3)
        assert source.developer_ids(project["id"]) == [project["developerId"]]
    finally:
        source.close()


def test_topics_missing_or_broker_down_are_source_unavailable(broker):
    for bootstrap in (broker, "127.0.0.1:1"):
        source = TopicReplaySource(bootstrap, timeout=2)
        try:
            with pytest.raises(Refused) as refused:
                source.check_available()
        finally:
            source.close()
        assert refused.value.code == IMPORT_SOURCE_UNAVAILABLE
        assert refused.value.line().startswith("CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: TopicReplay: ")


def test_topic_items_apply_in_message_order(engine):
    from pin_chessboard_pipelines.events.payloads import Handbook
    from pin_chessboard_pipelines.replica.apply import ApplyContext

    developer = dataset.item(SPEC, "developers", 0)
    ctx = ApplyContext("c", Handbook(), 30, 300, stage="Developers")
    tombstone = {"id": developer["id"], TOMBSTONE: True}
    newer = {**developer, "version": developer["version"] + 1}
    with engine.begin() as conn:
        result = apply_topic_items(
            conn, "developer", [developer, tombstone, newer, {"id": "x", "junk": 1}], ctx
        )
    assert (result.planned, result.applied, result.failed) == (4, 3, 1)  # create, delete, re-create; junk
    assert count(engine, "SELECT deleted_at IS NULL FROM chessboard.developers") is True
    assert count(engine, "SELECT version FROM chessboard.developers") == 3

"""The outbox relay against real PostgreSQL and a real Kafka-protocol broker (Tansu)."""

from __future__ import annotations

import json
import threading
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import sqlalchemy as sa

from pin_chessboard_pipelines.events.fast_path import relay_after_commit, relay_pending
from pin_chessboard_pipelines.events.outbox import (
    HEADER_NAMES,
    OutboxEvent,
    payload_bytes,
    pending_summary,
    purge_published,
    write_outbox,
)
from pin_chessboard_pipelines.events.payloads import (
    BUILDING_UPSERTED,
    DEVELOPER_UPSERTED,
    PROJECT_UPSERTED,
    PROPERTY_OBJECT_UPSERTED,
    project_upserted,
    topic_of,
)
from pin_chessboard_pipelines.events.reference_consumer import EventProjection, read_events
from pin_chessboard_pipelines.events.relay import (
    RELAY_LOCK,
    OutboxRelay,
)
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.runtime.embedded import free_port
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.store.tables import developers, outbox_messages, projects
from tests.support.polling import wait_until
from tests.support.recalc_data import StoreBuilder, standard_project


def outbox_rows(engine) -> list[dict]:
    with engine.connect() as conn:
        return [
            dict(r)
            for r in conn.execute(sa.select(outbox_messages).order_by(outbox_messages.c.id)).mappings()
        ]


def consumed(bootstrap: str, message_ids: set[str], topics=None, timeout: float = 30.0):
    """Every event of `topics` once all `message_ids` are on them."""
    return read_events(
        bootstrap,
        topics,
        until=lambda events: message_ids <= {e.message_id for e in events},
        timeout=timeout,
    )


def test_fast_path_after_commit_publishes_and_never_fails_the_job(engine, kafka_bootstrap):
    key = str(uuid.uuid4())
    with engine.begin() as conn:
        write_outbox(conn, [OutboxEvent(DEVELOPER_UPSERTED, key, {"id": key, "version": 1})])
    assert relay_after_commit(engine, f"127.0.0.1:{free_port()}") is None  # nothing listens there
    assert outbox_rows(engine)[0]["published_at"] is None
    assert relay_after_commit(engine, kafka_bootstrap).published == 1
    assert outbox_rows(engine)[0]["published_at"] is not None


def test_nothing_pending_is_a_quick_no_op(engine, kafka_bootstrap):
    result = relay_pending(engine, kafka_bootstrap)
    assert (result.published, result.batches, result.lock_busy) == (0, 0, False)


def test_rows_reach_their_topics_with_key_headers_and_are_marked(engine, kafka_bootstrap):
    developer, building = str(uuid.uuid4()), str(uuid.uuid4())
    events = [
        OutboxEvent(DEVELOPER_UPSERTED, developer, {"id": developer, "version": 1}, correlation_id="c-1"),
        OutboxEvent(BUILDING_UPSERTED, building, {"id": building, "name": "Корпус 1", "version": 1}, "c-1"),
        OutboxEvent(DEVELOPER_UPSERTED, developer, {"id": developer, "version": 2}, correlation_id="c-2"),
    ]
    with engine.begin() as conn:
        write_outbox(conn, events)

    result = relay_pending(engine, kafka_bootstrap)

    assert (result.published, result.failed_attempts) == (3, 0)
    assert all(row["published_at"] is not None for row in outbox_rows(engine))
    wanted = {str(e.message_id): e for e in events}
    got = [e for e in consumed(kafka_bootstrap, set(wanted)) if e.message_id in wanted]
    assert len(got) == 3
    for event in got:
        sent = wanted[event.message_id]
        assert event.topic == sent.topic
        assert event.key == sent.aggregate_id
        assert list(event.headers) == list(HEADER_NAMES)
        assert event.headers == sent.headers()
        assert event.headers["contractVersion"] == "1"
        assert event.payload == sent.payload
    developer_events = [e for e in got if e.key == developer]
    assert [e.version for e in developer_events] == [1, 2]  # commit order per key
    assert developer_events[0].partition == developer_events[1].partition


def _insert_project(conn, **values) -> dict:
    developer_id = uuid.uuid4()
    conn.execute(
        sa.insert(developers).values(
            id=developer_id, external_talent_id=uuid.uuid4(), replica_version=1, name="ГК Север 1"
        )
    )
    row = {
        "id": uuid.uuid4(),
        "external_talent_id": uuid.uuid4(),
        "replica_version": 2,
        "tenant_id": developer_id,
        "developer_id": developer_id,
        "name": "ЖК «Северный»",
        "type": "ApartHotel",
        "class": "Business",
        "construction_status": "Planned",
        "country_id": 643,
        "region_id": 23,
        "city_id": 3,
        "stars": 4,
        "hotelier_id": uuid.uuid4(),
        "currency_id": 643,
        "payback_years": Decimal("7.5"),
        "cover_image_file_id": None,
    } | values
    conn.execute(sa.insert(projects).values(**row))
    return dict(conn.execute(sa.select(projects).where(projects.c.id == row["id"])).mappings().one())


def test_project_upserted_consumed_from_the_topic_is_exactly_the_contract_payload(engine, kafka_bootstrap):
    with engine.begin() as conn:
        project = _insert_project(conn)
        handbook = load_handbook(conn)
        payload = project_upserted(project, handbook)
        event = OutboxEvent(PROJECT_UPSERTED, str(project["id"]), payload, correlation_id="seed-003")
        write_outbox(conn, [event])

    relay_pending(engine, kafka_bootstrap)

    [got] = [
        e for e in consumed(kafka_bootstrap, {str(event.message_id)}) if e.message_id == str(event.message_id)
    ]
    assert got.topic == "pin.chessboard.project-upserted.v1"
    assert got.key == str(project["id"])
    assert got.payload == {
        "id": str(project["id"]),
        "tenantId": str(project["developer_id"]),
        "developerId": str(project["developer_id"]),
        "status": "Draft",
        "name": "ЖК «Северный»",
        "type": "ApartHotel",
        "class": "Business",
        "constructionStatus": "Planned",
        "countryId": 643,
        "countrySnapshot": {"id": 643, "name": "Россия", "isoCode": "RUS"},
        "regionId": 23,
        "regionSnapshot": {"id": 23, "name": "Краснодарский край"},
        "cityId": 3,
        "citySnapshot": {"id": 3, "name": "Сочи"},
        "stars": 4,
        "hotelierId": str(project["hotelier_id"]),
        "price": None,
        "currencyId": 643,
        "currencySnapshot": {"id": 643, "isoCode": "RUB", "name": "Российский рубль", "sign": "₽"},
        "propertyObjectsTotalCount": 0,
        "propertyObjectsFreeCount": 0,
        "paybackYears": 7.5,
        "coverImageFileId": None,
        "version": 1,
    }
    assert got.headers["aggregateType"] == "Project" and got.headers["correlationId"] == "seed-003"


def test_republish_after_recalc_arrives_with_a_higher_version(engine, kafka_bootstrap):
    with engine.begin() as conn:
        project = standard_project(StoreBuilder(conn))
        row = dict(conn.execute(sa.select(projects).where(projects.c.id == project.id)).mappings().one())
        first = OutboxEvent(PROJECT_UPSERTED, str(project.id), project_upserted(row, load_handbook(conn)))
        write_outbox(conn, [first])
        StoreBuilder(conn).request(project)  # due now
    relay_pending(engine, kafka_bootstrap)

    drained = drain(engine, correlation_id="recalc-run")  # docs/project-aggregates-recalc.md
    assert drained.recalculated == 1
    relay_after_commit(engine, kafka_bootstrap)  # the fast path after the drain's commits

    key = str(project.id)
    topic = topic_of(PROJECT_UPSERTED)
    got = wait_until(
        lambda: (lambda evs: evs if len(evs) >= 2 else None)(
            [e for e in read_events(kafka_bootstrap, [topic]) if e.key == key]
        ),
        what="the republished project",
    )
    assert [e.version for e in got] == [1, 2]
    assert got[1].headers["correlationId"] == "recalc-run"
    assert got[1].payload["price"] == {"min": 4500000.5, "max": 7000000}
    assert (got[1].payload["propertyObjectsTotalCount"], got[1].payload["propertyObjectsFreeCount"]) == (6, 4)
    projection = EventProjection().apply_all(got + got[:1])  # a late redelivery of v1
    assert projection.state[(topic, key)]["version"] == 2
    assert projection.counts == {"applied": 2, "duplicate": 1, "stale": 0}


def test_reference_consumer_skips_stale_versions_and_duplicates(engine, kafka_bootstrap):
    key = str(uuid.uuid4())
    events = [OutboxEvent(BUILDING_UPSERTED, key, {"id": key, "version": v}) for v in (1, 3, 2)]
    with engine.begin() as conn:
        write_outbox(conn, events)
    relay_pending(engine, kafka_bootstrap)
    ids = {str(e.message_id) for e in events}
    got = [e for e in consumed(kafka_bootstrap, ids) if e.message_id in ids]
    projection = EventProjection()
    assert [projection.apply(e) for e in got + got] == ["applied"] * 2 + ["stale"] + ["duplicate"] * 3
    assert projection.state[(topic_of(BUILDING_UPSERTED), key)]["version"] == 3


def test_a_crash_between_ack_and_mark_republishes_with_the_same_message_id(engine, kafka_bootstrap):
    key = str(uuid.uuid4())
    events = [OutboxEvent(PROPERTY_OBJECT_UPSERTED, key, {"id": key, "version": v}) for v in (1, 2, 3)]
    with engine.begin() as conn:
        write_outbox(conn, events)

    class CrashBeforeMark(OutboxRelay):
        def _mark(self, *args, **kwargs):
            raise ConnectionError("relay process died after the broker acknowledged")

    crashed = CrashBeforeMark(engine, kafka_bootstrap)
    try:
        crashed.relay_pending()
    except ConnectionError:
        pass
    else:
        raise AssertionError("the crash did not happen")
    crashed.close()
    assert all(row["published_at"] is None for row in outbox_rows(engine))  # never marked

    assert relay_pending(engine, kafka_bootstrap).published == 3
    ids = {str(e.message_id) for e in events}
    got = wait_until(
        lambda: (lambda evs: evs if len(evs) == 6 else None)(
            [e for e in read_events(kafka_bootstrap, [topic_of(PROPERTY_OBJECT_UPSERTED)]) if e.key == key]
        ),
        what="both deliveries",
    )
    by_id = defaultdict(list)
    for e in got:
        by_id[e.message_id].append(e)
    assert set(by_id) == ids and all(len(copies) == 2 for copies in by_id.values())
    assert all(copies[0].payload == copies[1].payload for copies in by_id.values())
    assert [e.version for e in got] == [1, 2, 3, 1, 2, 3]
    assert EventProjection().apply_all(got).counts == {"applied": 3, "duplicate": 3, "stale": 0}


def test_a_second_relay_does_not_publish_while_the_lock_is_held(engine, kafka_bootstrap):
    key = str(uuid.uuid4())
    with engine.begin() as conn:
        write_outbox(conn, [OutboxEvent(DEVELOPER_UPSERTED, key, {"id": key, "version": 1})])
    with engine.connect() as holder:
        assert RELAY_LOCK.try_acquire(holder)
        holder.commit()
        busy = relay_pending(engine, kafka_bootstrap)
        assert busy.lock_busy and busy.published == 0
        assert outbox_rows(engine)[0]["published_at"] is None
        RELAY_LOCK.release(holder)
        holder.commit()
    assert relay_pending(engine, kafka_bootstrap).published == 1


def test_per_key_order_holds_under_concurrent_relays_and_writers(engine, kafka_bootstrap):
    keys_per_writer, versions = 8, 40
    writers_done = threading.Event()
    results = []
    errors: list[BaseException] = []

    def writer(keys: list[str]) -> None:
        try:
            for version in range(1, versions + 1):
                with engine.begin() as conn:  # one aggregate change per transaction, keys interleaved
                    write_outbox(
                        conn,
                        [
                            OutboxEvent(PROPERTY_OBJECT_UPSERTED, k, {"id": k, "version": version})
                            for k in keys
                        ],
                    )
        except BaseException as error:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(error)

    def relay() -> None:
        try:
            with OutboxRelay(engine, kafka_bootstrap, batch_size=37) as r:
                while not writers_done.is_set():
                    results.append(r.relay_pending())
                    writers_done.wait(0.005)
                results.append(r.relay_pending(until_empty=True, max_seconds=60))
        except BaseException as error:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(error)

    key_sets = [[str(uuid.uuid4()) for _ in range(keys_per_writer)] for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(keys,)) for keys in key_sets]
    relays = [threading.Thread(target=relay) for _ in range(3)]
    for t in relays + writers:
        t.start()
    for t in writers:
        t.join()
    writers_done.set()
    for t in relays:
        t.join()
    assert errors == []
    assert pending_summary(engine)["backlog"] == 0
    assert any(r.lock_busy for r in results)  # the relays did run side by side

    rows = outbox_rows(engine)
    all_keys = {k for keys in key_sets for k in keys}
    got = wait_until(
        lambda: (lambda evs: evs if len(evs) >= len(rows) else None)(
            [
                e
                for e in read_events(kafka_bootstrap, [topic_of(PROPERTY_OBJECT_UPSERTED)])
                if e.key in all_keys
            ]
        ),
        what="every message",
    )
    assert {e.message_id for e in got} == {str(r["message_id"]) for r in rows}
    per_key = defaultdict(list)
    for e in sorted(got, key=lambda e: (e.partition, e.offset)):
        per_key[e.key].append(e.version)
    assert all(per_key[k] == list(range(1, versions + 1)) for k in all_keys)


def test_purge_deletes_old_published_rows_in_bounded_batches(engine):
    events = [OutboxEvent(DEVELOPER_UPSERTED, str(uuid.uuid4()), {"version": 1}) for _ in range(7)]
    with engine.begin() as conn:
        write_outbox(conn, events)
        ids = [r["id"] for r in conn.execute(sa.select(outbox_messages.c.id).order_by("id")).mappings()]
        old = datetime.now(UTC) - timedelta(days=8)
        recent = datetime.now(UTC) - timedelta(days=1)
        conn.execute(
            sa.update(outbox_messages).where(outbox_messages.c.id.in_(ids[:5])).values(published_at=old)
        )
        conn.execute(
            sa.update(outbox_messages).where(outbox_messages.c.id == ids[5]).values(published_at=recent)
        )

    assert purge_published(engine, 7 * 86400, batch_size=2, max_batches=2) == 4  # bounded: 2 batches of 2
    assert purge_published(engine, 7 * 86400, batch_size=2) == 1
    assert purge_published(engine, 7 * 86400, batch_size=2) == 0
    left = outbox_rows(engine)
    assert [r["id"] for r in left] == ids[5:]  # the recent published row and the pending one stay
    assert left[1]["published_at"] is None


def test_backlog_and_lag_gauges_of_the_exporter_follow_the_relay(engine, kafka_bootstrap):
    q = queries("metrics")
    with engine.connect() as conn:
        assert conn.execute(q["outbox_backlog"]).scalar_one() == 0
        assert conn.execute(q["outbox_lag_seconds"]).scalar_one() == 0
    occurred = datetime.now(UTC) - timedelta(seconds=90)
    with engine.begin() as conn:
        write_outbox(conn, [OutboxEvent(DEVELOPER_UPSERTED, "k", {"version": 1}, occurred_at=occurred)])
        write_outbox(conn, [OutboxEvent(DEVELOPER_UPSERTED, "k", {"version": 2})])
    with engine.connect() as conn:
        assert conn.execute(q["outbox_backlog"]).scalar_one() == 2
        lag = conn.execute(q["outbox_lag_seconds"]).scalar_one()
    # the oldest row's age: 90 s when written, plus however long it took to read it
    assert 89 <= lag <= (datetime.now(UTC) - occurred).total_seconds() + 1
    assert pending_summary(engine)["backlog"] == 2
    relay_pending(engine, kafka_bootstrap)
    with engine.connect() as conn:
        assert conn.execute(q["outbox_backlog"]).scalar_one() == 0
        assert conn.execute(q["outbox_lag_seconds"]).scalar_one() == 0


def test_message_value_is_the_compact_payload_json(engine, kafka_bootstrap):
    key = str(uuid.uuid4())
    payload = {"id": key, "name": "Корпус «А», секция 1", "version": 1, "totalArea": 42.75}
    event = OutboxEvent(BUILDING_UPSERTED, key, payload)
    with engine.begin() as conn:
        write_outbox(conn, [event])
    relay_pending(engine, kafka_bootstrap)
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"raw-{uuid.uuid4()}"})
    try:
        topic = topic_of(BUILDING_UPSERTED)
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        raw = wait_until(
            lambda: next(
                (
                    m.value()
                    for m in consumer.consume(500, 0.2)
                    if m.error() is None and m.key() == key.encode()
                ),
                None,
            ),
            what="the raw message",
        )
    finally:
        consumer.close()
    assert json.loads(raw) == payload
    assert raw == payload_bytes(json.loads(raw))  # compact separators, UTF-8, no ASCII escapes

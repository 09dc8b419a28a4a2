"""handbook-sync against real PostgreSQL and a Tansu broker (docs/store.md#handbook-sync): a rename
of a region or city republishes exactly the live projects that use it, through the outbox to
Kafka, in batches; stale values, unchanged names and invalid values republish nothing."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.errors import SYNC_LOCK_HELD, SYNC_VALIDATION_FAILED, Refused
from pin_chessboard_pipelines.events.payloads import PROJECT_UPSERTED, topic_of
from pin_chessboard_pipelines.events.reference_consumer import read_events
from pin_chessboard_pipelines.handbook_sync import HandbookSync
from pin_chessboard_pipelines.handbook_sync import store as handbook_store
from pin_chessboard_pipelines.handbook_sync.values import HandbookValue, Kind
from pin_chessboard_pipelines.store.handbook import CITIES_TOPIC, REGIONS_TOPIC
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.talent.simulator.handbook import (
    ensure_handbook_topics,
    publish_handbook,
    rename_city,
    rename_region,
)
from tests.support.replica import apply, context_factory, rows, tid
from tests.support.talent_kafka import produce

# every event written meets its schema (tests/support/contracts.py)
pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.usefixtures("outbox_contract")]

PROJECT_TOPIC = topic_of(PROJECT_UPSERTED)


@pytest.fixture
def broker(broker):
    ensure_handbook_topics(broker)
    return broker


def project(developer_id: str, region_id: int | None, city_id: int | None, **extra) -> dict:
    return {
        "id": tid(),
        "developerId": developer_id,
        "version": 1,
        "name": f"ЖК {tid()[:8]}",
        "type": "ResidentialComplex",
        "class": "Comfort",
        "constructionStatus": "Planned",
        "countryId": 643,
        "regionId": region_id,
        "cityId": city_id,
        "currencyId": 643,
        **extra,
    }


@pytest.fixture
def projects(engine):
    """Region 77: five live projects (city 1 or none) and a deleted one; 78, 50 and a foreign one."""
    ctx = context_factory(engine)(run_id=None)
    developer = {"id": tid(), "version": 1, "name": "ГК Тест"}
    assert apply(engine, "developer", [developer], ctx).applied == 1
    dev = developer["id"]
    items = {
        "moscow": [project(dev, 77, 1) for _ in range(4)] + [project(dev, 77, None)],
        "moscow_deleted": [project(dev, 77, 1, deletedAt="2026-11-30T10:00:00Z")],
        "spb": [project(dev, 78, 2) for _ in range(3)],
        "oblast": [project(dev, 50, 9)],
        "abroad": [project(dev, None, None, countryId=784)],
    }
    result = apply(engine, "project", [p for group in items.values() for p in group], ctx)
    assert (result.applied, result.failed) == (11, 0)
    return items


def sync(engine, broker, **options) -> object:
    options.setdefault("republish_batch_size", 2)  # several batches for five projects
    return HandbookSync(engine, broker, poll_timeout=0.1, **options).run(until_idle=True, max_seconds=60)


def project_rows(engine) -> dict[str, dict]:
    return {
        str(r["external_talent_id"]): r
        for r in rows(
            engine, "SELECT external_talent_id, id, version, region_id, city_id FROM chessboard.projects"
        )
    }


def outbox_projects(engine, after_id: int = 0) -> list[dict]:
    return rows(
        engine,
        "SELECT id, message_key, payload FROM chessboard.outbox_messages WHERE topic = :t AND id > :after ORDER BY id",
        t=PROJECT_TOPIC,
        after=after_id,
    )


def last_outbox_id(engine) -> int:
    return rows(engine, "SELECT coalesce(max(id), 0) AS n FROM chessboard.outbox_messages")[0]["n"]


def test_a_region_rename_republishes_exactly_its_live_projects_to_kafka(engine, broker, projects):
    publish_handbook(broker)  # the shipped names at version 1: nothing renamed
    first = sync(engine, broker)
    assert first.stopped == "idle" and first.applied == 17 and first.renamed == 0 and first.republished == 0
    before = project_rows(engine)
    mark = last_outbox_id(engine)

    rename_region(broker, 77, "Город Москва", version=2)
    result = sync(engine, broker)

    moscow = {p["id"] for p in projects["moscow"]}
    assert result.renamed == 1 and result.republished == len(moscow) == 5
    assert result.republish_batches == 3  # 2 + 2 + 1; the first in the handbook change's transaction
    events = outbox_projects(engine, mark)
    pin_ids = {str(before[t]["id"]): t for t in moscow}
    assert sorted(e["message_key"] for e in events) == sorted(pin_ids)  # exactly those, once each
    after = project_rows(engine)
    for event in events:
        talent_id = pin_ids[event["message_key"]]
        assert event["payload"]["regionSnapshot"] == {"id": 77, "name": "Город Москва"}
        assert event["payload"]["version"] == before[talent_id]["version"] + 1 == after[talent_id]["version"]
    untouched = set(before) - moscow
    assert all(after[t]["version"] == before[t]["version"] for t in untouched)  # the deleted one too
    assert load_handbook_names(engine)[77] == "Город Москва"
    assert rows(engine, "SELECT count(*) AS n FROM chessboard.handbook_republish")[0]["n"] == 0

    # end to end: the fast path put them on the topic
    on_kafka = read_events(
        broker, [PROJECT_TOPIC], until=lambda es: sum(e.key in pin_ids for e in es) >= 5 + 5, timeout=30
    )
    renamed = [
        e for e in on_kafka if e.key in pin_ids and e.payload["regionSnapshot"]["name"] == "Город Москва"
    ]
    assert sorted(e.key for e in renamed) == sorted(pin_ids)


def test_stale_and_unchanged_values_republish_nothing(engine, broker, projects):
    rename_region(broker, 77, "Город Москва", version=5)
    assert sync(engine, broker).republished == 5
    mark = last_outbox_id(engine)

    rename_region(broker, 77, "Старое имя", version=4)  # older than the replica's 5: skipped
    rename_region(broker, 77, "Город Москва", version=6)  # newer, the same name
    result = sync(engine, broker)

    assert (result.applied, result.skipped, result.renamed, result.republished) == (1, 1, 0, 0)
    assert outbox_projects(engine, mark) == []
    version = rows(engine, "SELECT name, version FROM chessboard.handbook_regions WHERE id = 77")
    assert version == [{"name": "Город Москва", "version": 6}]


def test_older_values_in_one_batch_lose_to_the_newest(engine, broker, projects):
    produce(broker, REGIONS_TOPIC, "77", {"id": 77, "name": "Третье", "version": 3})
    produce(broker, REGIONS_TOPIC, "77", {"id": 77, "name": "Первое", "version": 1})
    result = sync(engine, broker)
    assert result.renamed == 1 and result.republished == 5
    names = {
        e["payload"]["regionSnapshot"]["name"]
        for e in outbox_projects(engine)
        if e["payload"]["regionId"] == 77
    }
    assert "Третье" in names and "Первое" not in names


def test_a_city_rename_republishes_the_projects_of_that_city(engine, broker, projects):
    mark = last_outbox_id(engine)
    rename_city(broker, 1, "Москва-сити", version=2)
    result = sync(engine, broker)

    in_city = {p["id"] for p in projects["moscow"] if p["cityId"] == 1}
    assert result.republished == len(in_city) == 4
    events = outbox_projects(engine, mark)
    assert all(e["payload"]["citySnapshot"] == {"id": 1, "name": "Москва-сити"} for e in events)
    assert all(e["payload"]["regionSnapshot"] == {"id": 77, "name": "Москва"} for e in events)
    assert len(events) == 4


def test_an_unknown_region_becomes_known_for_projects_synced_from_then_on(engine, broker, projects):
    produce(broker, REGIONS_TOPIC, "91", {"id": 91, "name": "Республика Крым", "version": 1})
    produce(broker, CITIES_TOPIC, "95", {"id": 95, "regionId": 91, "name": "Симферополь", "version": 1})
    result = sync(engine, broker)
    assert (result.created, result.republished) == (2, 0)

    ctx = context_factory(engine)(run_id=None)  # a handbook read after the sync
    developer = rows(engine, "SELECT external_talent_id FROM chessboard.developers")[0]["external_talent_id"]
    item = project(str(developer), 91, 95)
    mark = last_outbox_id(engine)
    assert apply(engine, "project", [item], ctx).applied == 1
    (event,) = outbox_projects(engine, mark)
    assert event["payload"]["regionSnapshot"] == {"id": 91, "name": "Республика Крым"}
    assert event["payload"]["citySnapshot"] == {"id": 95, "name": "Симферополь"}


def test_invalid_values_are_quarantined_and_the_rest_applies(engine, broker, projects):
    produce(broker, REGIONS_TOPIC, "78", {"id": 78, "name": "", "version": 2})
    produce(broker, REGIONS_TOPIC, "66", {"id": 66, "name": "Урал", "version": "two"})
    produce(broker, CITIES_TOPIC, "2", {"id": 2, "name": "Петербург", "version": 2})  # no regionId
    produce(broker, REGIONS_TOPIC, "54", {"id": 54, "name": "Новосибирская обл.", "version": 2})
    result = sync(engine, broker)

    assert (result.failed, result.applied) == (3, 1)
    quarantined = rows(
        engine,
        "SELECT stage, external_id, error_code FROM chessboard.talent_import_failed_items ORDER BY stage, external_id",
    )
    assert quarantined == [
        {"stage": "HandbookCities", "external_id": "2", "error_code": SYNC_VALIDATION_FAILED},
        {"stage": "HandbookRegions", "external_id": "66", "error_code": SYNC_VALIDATION_FAILED},
        {"stage": "HandbookRegions", "external_id": "78", "error_code": SYNC_VALIDATION_FAILED},
    ]
    assert load_handbook_names(engine)[78] == "Санкт-Петербург"


class Crash(BaseException):
    """The process dies after the batch's transaction, before its offsets are committed."""


def test_a_batch_read_again_after_a_crash_quarantines_its_invalid_values_once(
    engine, broker, projects, monkeypatch
):
    from pin_chessboard_pipelines.events import consume_loop

    produce(broker, REGIONS_TOPIC, "78", {"id": 78, "name": "", "version": 2})
    produce(broker, REGIONS_TOPIC, "54", {"id": 54, "name": "Новосибирская обл.", "version": 2})
    commit = consume_loop.commit_batch

    def crash(*_args, **_kwargs):
        raise Crash

    monkeypatch.setattr(consume_loop, "commit_batch", crash)
    with pytest.raises(Crash):
        sync(engine, broker)
    monkeypatch.setattr(consume_loop, "commit_batch", commit)
    again = sync(engine, broker)

    assert again.failed == 1  # seen again, still invalid
    quarantined = rows(engine, "SELECT external_id FROM chessboard.talent_import_failed_items")
    assert quarantined == [{"external_id": "78"}]


def test_a_republish_cut_short_goes_on_from_its_cursor(engine, broker, projects):
    """A run that stops (or dies) after the handbook change: the next one finishes the rest, each
    project once."""
    mark = last_outbox_id(engine)
    with engine.begin() as conn:  # what a run that died after its first transaction leaves
        applied = handbook_store.apply_values(
            conn, [HandbookValue(Kind.REGION, 77, "Москва (новая)", 2)], [], "test"
        )
        assert [r.id for r in applied.renames or []] == [77]
        done = handbook_store.republish_batch(conn, Kind.REGION, 77, 2, "test")
        assert done is not None and (done.projects, done.finished) == (2, False)

    result = sync(engine, broker)  # nothing on the topics: only the pending republish

    assert (result.messages, result.republished) == (0, 3)
    events = outbox_projects(engine, mark)
    assert len(events) == len({e["message_key"] for e in events}) == 5
    assert {e["payload"]["regionSnapshot"]["name"] for e in events} == {"Москва (новая)"}


def test_a_second_consumer_is_refused(engine, broker):
    started = threading.Event()

    def stop_soon() -> bool:
        started.set()
        return False

    first = threading.Thread(
        target=lambda: HandbookSync(engine, broker, poll_timeout=0.1).run(
            max_seconds=3, should_stop=stop_soon
        )
    )
    first.start()
    try:
        assert started.wait(20)
        with pytest.raises(Refused) as refused:
            HandbookSync(engine, broker).run(until_idle=True, max_seconds=5)
        assert refused.value.code == SYNC_LOCK_HELD
    finally:
        first.join(30)


def load_handbook_names(engine) -> dict[int, str]:
    with engine.connect() as conn:
        return {i: r["name"] for i, r in load_handbook(conn).regions.items()}


def test_the_handbook_replica_keeps_its_versions(engine):
    with engine.connect() as conn:
        versions = (
            conn.execute(sa.text("SELECT DISTINCT version FROM chessboard.handbook_regions")).scalars().all()
        )
    assert versions == [0]  # seeded, never synced


def test_a_producer_reading_the_handbook_waits_for_a_rename_and_reads_its_name(engine):
    """HANDBOOK_CHANGE_LOCK: a transaction that reads the handbook for its events (talent-sync's
    poll batch, a republish batch) waits while a rename is uncommitted, then reads the new name."""
    from pin_chessboard_pipelines.store.handbook_replica import load_handbook_for_publish

    seen: dict[str, object] = {}
    reading = threading.Event()

    def producer() -> None:
        reading.set()
        with engine.begin() as conn:
            seen["name"] = load_handbook_for_publish(conn).regions[77]["name"]

    with engine.begin() as conn:
        handbook_store.apply_values(conn, [HandbookValue(Kind.REGION, 77, "Москва-2", 2)], [], "test")
        thread = threading.Thread(target=producer)
        thread.start()
        assert reading.wait(10)
        thread.join(1.0)
        assert thread.is_alive() and "name" not in seen  # waiting on the rename's transaction
    thread.join(10)
    assert seen["name"] == "Москва-2"


def test_a_rename_during_a_long_lived_drain_slot_reaches_every_recalc_after_it(engine, broker):
    """The recalc keeps the handbook for its whole slot, yet every event written after
    handbook-sync's commit carries the new name: each project's transaction takes HANDBOOK_CHANGE_LOCK
    shared and reads the handbook again when handbook-sync changed it."""
    from pin_chessboard_pipelines.recalc.drain_slot import drain_until
    from tests.support.recalc_data import StoreBuilder, standard_project

    with engine.begin() as conn:
        builder = StoreBuilder(conn)
        first, second = standard_project(builder), standard_project(builder)  # both in region 77
        builder.request(first)
    marks: dict[str, int] = {}
    slot_over = threading.Event()

    def after_pass(result) -> None:
        if "renamed" not in marks:  # the slot's first pass published with the shipped name
            marks["before"] = last_outbox_id(engine)
            rename_region(broker, 77, "Город Москва", version=2)
            assert sync(engine, broker).renamed == 1  # committed: its republish of both is written
            marks["renamed"] = last_outbox_id(engine)
            with engine.begin() as conn:
                StoreBuilder(conn).request(second)  # recalculated in the same slot
        else:
            slot_over.set()

    ends_at = time.time() + 120

    def clock() -> float:
        return ends_at if slot_over.is_set() else time.time()

    result = drain_until(engine, ends_at=ends_at, poll_seconds=0.2, after_pass=after_pass, clock=clock)
    assert result.recalculated == 2 and result.passes == 2
    names = [e["payload"]["regionSnapshot"]["name"] for e in outbox_projects(engine)]
    assert names[0] != "Город Москва"  # the first recalc, before the rename
    after_commit = outbox_projects(engine, marks["renamed"])
    assert len(after_commit) == 1  # the second project's recalc
    assert [e["payload"]["regionSnapshot"] for e in after_commit] == [{"id": 77, "name": "Город Москва"}]
    republished = outbox_projects(engine, marks["before"])[: -len(after_commit)]
    assert len(republished) == 2 and all(
        e["payload"]["regionSnapshot"]["name"] == "Город Москва" for e in republished
    )
    # the recalc's event is newer than handbook-sync's republish: the consumers' version guard keeps it
    assert after_commit[0]["payload"]["version"] > max(
        e["payload"]["version"] for e in republished if e["message_key"] == after_commit[0]["message_key"]
    )


def test_a_kept_handbook_is_read_again_only_after_a_change(engine):
    """HandbookCache: a publishing transaction keeps the handbook while its stamp is unchanged and
    reads it again once handbook-sync changed a name (an import's page, talent-sync's batch)."""
    from pin_chessboard_pipelines.store.handbook_replica import HandbookCache

    cache = HandbookCache()
    with engine.begin() as conn:
        first = cache.for_publish(conn)
    with engine.begin() as conn:
        assert cache.for_publish(conn) is first  # unchanged: one small query, no read
    with engine.begin() as conn:
        handbook_store.apply_values(
            conn, [HandbookValue(Kind.CITY, 1, "Москва-сити", 2, region_id=77)], [], "test"
        )
    with engine.begin() as conn:
        again = cache.for_publish(conn)
    assert again is not first and again.cities[1]["name"] == "Москва-сити"

"""Helpers of the Talent topic tests (streaming sync, TopicReplay, parity): a broker of the test's
own, extra databases, and the replica / event state in a form two stores can be compared by."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from confluent_kafka import Consumer, Producer, TopicPartition

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.events.dead_letters import dead_letter_topic
from pin_chessboard_pipelines.events.outbox import HEADER_NAMES
from pin_chessboard_pipelines.runtime.embedded import BROKER_SCHEMAS, admin_execute, free_port, start_tansu
from pin_chessboard_pipelines.store.engine import get_engine, with_database
from pin_chessboard_pipelines.store.tables import REPLICA_TABLES
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP
from pin_chessboard_pipelines.talent_import.sources import TopicReplaySource
from tests.support.postgres import template_name

# Columns that say when something happened, not what: never equal across two stores.
WHEN_COLUMNS = frozenset({"created_at", "updated_at", "last_synced_at"})
# Event headers that identify one delivery, not the event.
DELIVERY_HEADERS = frozenset({"messageId", "occurredAt", "correlationId"})
_databases = itertools.count()


@contextmanager
def own_broker() -> Iterator[str]:
    """A Tansu broker only this test uses (the Talent topics must hold exactly its dataset), with the
    project's schemas: an event that breaks its topic's schema is refused (docs/events.md#schemas)."""
    port = free_port()
    proc = start_tansu(port, Path(tempfile.mkdtemp(prefix="tansu-")) / "tansu.log", BROKER_SCHEMAS)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.kill()  # in-memory storage: nothing to shut down gracefully, no client to wait for
        proc.wait(timeout=10)


def poisoned_objects(spec: dataset.DatasetSpec) -> list[int]:
    """The indexes of the property objects `spec` makes invalid (quarantined when applied)."""
    return [i for i in range(dataset.count(spec, "property-objects")) if dataset.poison_kind(spec, i)]


@contextmanager
def extra_database(pg_server_url: str) -> Iterator[str]:
    """Another freshly migrated chessboard database on the test server."""
    name = f"chessboard_extra_{os.getpid()}_{next(_databases)}"
    admin_execute(pg_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_name()}"')
    url = with_database(pg_server_url, name)
    try:
        yield url
    finally:
        get_engine(url).dispose()
        admin_execute(pg_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def produce(bootstrap: str, topic: str, key: str, value: dict[str, Any] | None) -> None:
    """One message (None = tombstone) with the simulator's partitioner."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    producer.produce(topic, key=key.encode(), value=None if value is None else json.dumps(value).encode())
    assert producer.flush(10) == 0


def dead_letters(bootstrap: str) -> list:
    """Every message of talent-sync's dead-letter topic."""
    reader = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"test-{uuid.uuid4()}", "enable.auto.commit": False}
    )
    try:
        reader.assign([TopicPartition(dead_letter_topic(CONSUMER_GROUP), 0, 0)])
        found = []
        while (message := reader.poll(3.0)) is not None:
            if message.error() is None:
                found.append(message)
        return found
    finally:
        reader.close()


def committed_offsets(bootstrap: str, group: str = CONSUMER_GROUP) -> dict[tuple[str, int], int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(s.topic, p) for s in ENTITIES for p in range(s.partitions)]
        return {(tp.topic, tp.partition): tp.offset for tp in consumer.committed(tps, timeout=10)}
    finally:
        consumer.close()


def _clean(value: Any) -> Any:
    return str(value) if value is not None and not isinstance(value, bool | int | str) else value


def replica_state(engine) -> dict[str, list[tuple]]:
    """Every replica table as sorted rows without the WHEN_COLUMNS."""
    state = {}
    with engine.connect() as conn:
        for table in REPLICA_TABLES:
            columns = [c for c in table.c if c.name not in WHEN_COLUMNS]
            rows = conn.execute(sa.select(*columns)).all()
            state[table.name] = sorted(tuple(_clean(v) for v in row) for row in rows)
    return state


def event_set(engine) -> Counter:
    """The outbox as a multiset of (topic, key, payload, headers without DELIVERY_HEADERS)."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT topic, message_key, payload, headers FROM chessboard.outbox_messages")
        )
        return Counter(
            (
                row.topic,
                row.message_key,
                json.dumps(row.payload, sort_keys=True),
                tuple((h, row.headers.get(h)) for h in HEADER_NAMES if h not in DELIVERY_HEADERS),
            )
            for row in rows
        )


def side_effects(engine) -> dict[str, Any]:
    """Quarantine and recalc requests, without what differs by run (run ids, counts per batch)."""
    with engine.connect() as conn:
        quarantined = sorted(
            tuple(r)
            for r in conn.execute(
                sa.text("SELECT stage, external_id, error_code FROM chessboard.talent_import_failed_items")
            )
        )
        recalc = sorted(
            tuple(str(v) for v in r)
            for r in conn.execute(
                sa.text("SELECT project_id, tenant_id, last_reason FROM chessboard.project_recalc_requests")
            )
        )
    return {"quarantined": quarantined, "recalc": recalc}


def count(engine, sql: str, **params) -> Any:
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar_one()


def reset_group(bootstrap: str, engine: sa.Engine | None = None) -> None:
    """The talent-sync group back to offset 0, as a TopicReplay does once it holds the import lock
    (a fresh replica fed by the streaming sync starts there too)."""
    source = TopicReplaySource(bootstrap, engine=engine)  # with an engine: refused while talent-sync runs
    try:
        source.check_available()
        source.after_lock()
    finally:
        source.close()

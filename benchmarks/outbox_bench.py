"""Outbox relay benchmark: relay throughput to the broker and end-to-end lag commit -> consumed.

    python benchmarks/outbox_bench.py [--rows 1000000] [--batch-size N] [--lag-seconds 10] [--lag-rate 200]

Uses CHESSBOARD_DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS when set, otherwise starts an embedded
PostgreSQL and a Tansu broker of its own. Targets (issue 26): >= 50k messages/s on 2 cores, and
the relay as near as it gets to a raw producer on the same broker.

1. throughput: `--rows` property-object-upserted rows (~450-byte payloads, 10 rows per key) are
   inserted with one INSERT … SELECT, then one relay publishes them until the outbox is empty;
   messages/s = rows / relay wall time (read, produce, acknowledgement, mark published). The relay's
   producer is connected and the topics ensured before the clock starts, as the raw producer's.
2. raw producer, the baseline of 1.: the same rows (same values, keys and headers as the relay
   sends) read into memory first, untimed, then produced by a bare confluent-kafka producer with
   the relay's producer settings to the same broker and flushed; messages/s = rows / (produce +
   flush). No database: what the broker and the client alone allow. relay/raw is printed.
3. lag: a writer commits one event per transaction at `--lag-rate` per second and calls the fast
   path (`OutboxRelay.relay_pending`) right after each commit, as the jobs do; a consumer records
   when each message arrives. Lag = arrival - commit, p50 / p99 / max.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer, TopicPartition  # noqa: E402
from sqlalchemy import text  # noqa: E402

from benchmarks import servers  # noqa: E402
from benchmarks.cpu import own_cpu_seconds, postmaster_pid, tree_cpu_seconds  # noqa: E402
from pin_chessboard_pipelines.events.messages import batch_headers, message_values, producer_config  # noqa: E402
from pin_chessboard_pipelines.events.outbox import OutboxEvent, write_outbox  # noqa: E402
from pin_chessboard_pipelines.events.payloads import PROPERTY_OBJECT_UPSERTED, topic_of  # noqa: E402
from pin_chessboard_pipelines.events.relay import DEFAULT_BATCH_SIZE, OutboxRelay  # noqa: E402
from pin_chessboard_pipelines.events.topics_admin import end_offsets, ensure_topics, probe_consumer  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import ensure_database, free_port, start_tansu  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine, with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402
from pin_chessboard_pipelines.store.queries import queries  # noqa: E402

FILL_SQL = """
INSERT INTO chessboard.outbox_messages (message_id, topic, message_key, payload, headers, occurred_at)
SELECT m.message_id::uuid, :topic, m.key, jsonb_build_object(
           'id', m.key, 'tenantId', m.tenant, 'projectId', m.tenant, 'buildingId', m.tenant,
           'layoutId', NULL, 'number', (g % 500)::text, 'floor', g % 30, 'section', 1,
           'status', 'Free', 'statusSource', 'TalentSync', 'price', 5000000 + g % 100000,
           'totalArea', 42.5, 'deletedAt', NULL, 'version', g / :keys + 1),
       jsonb_build_object(
           'messageId', m.message_id, 'occurredAt', to_char(now(), 'YYYY-MM-DD"T"HH24:MI:SS.USOF'),
           'aggregateId', m.key, 'aggregateType', 'PropertyObject',
           'eventType', 'pin.chessboard.property-object-upserted', 'contractVersion', '1',
           'correlationId', 'outbox-bench'),
       now()
FROM generate_series(:first, :last) AS g,
     LATERAL (SELECT gen_random_uuid()::text AS message_id,
                     md5('key' || (g % :keys)::text)::uuid::text AS key,
                     md5('tenant' || (g % 97)::text)::uuid::text AS tenant) AS m
"""


def _database(args: argparse.Namespace) -> str:
    given = os.environ.get("CHESSBOARD_DATABASE_URL")
    if given:
        url = ensure_database(with_database(given, "postgres"), "chessboard_outbox_bench")
    else:
        server = servers.embedded_postgres("outbox-bench-pg-", args.pg_setting)
        url = ensure_database(server.get_uri(), "chessboard_outbox_bench")
        args._pg = server  # keep it alive
    upgrade(url)
    with get_engine(url).begin() as conn:
        conn.execute(text("TRUNCATE chessboard.outbox_messages"))
    return url


def _broker(args: argparse.Namespace) -> str:
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        return given
    port = free_port()
    args._tansu = start_tansu(port)
    return f"127.0.0.1:{port}"


class CpuMeter:
    """CPU seconds over a measured span: this process (its client library's threads included), the
    PostgreSQL server (its postmaster and every backend) and the broker, when they run on this machine."""

    def __init__(self, url: str, broker_pid: int | None) -> None:
        self.url = url
        self.pids = {"PostgreSQL": postmaster_pid(url), "broker": broker_pid}

    def _read(self) -> dict[str, float]:
        out = {"this process": own_cpu_seconds()}
        out.update({name: tree_cpu_seconds(pid) for name, pid in self.pids.items() if pid is not None})
        return out

    def __enter__(self) -> CpuMeter:
        self.server_before = servers.server_counters(self.url)
        self.started, self.before = time.perf_counter(), self._read()
        return self

    def __exit__(self, *exc: object) -> None:
        after = self._read()
        self.seconds = time.perf_counter() - self.started
        self.cpu = {name: after[name] - self.before[name] for name in after}
        # a backend reports its statistics when it goes idle or exits: close the pool's sessions first
        get_engine(self.url).dispose()
        time.sleep(0.5)
        self.server = servers.counters_since(self.url, self.server_before)

    def line(self, messages: int) -> str:
        """Where the CPU went, per message, against the machine's core-seconds of the span."""
        cores = os.cpu_count() or 1
        parts = ", ".join(
            f"{name} {seconds:.1f} s ({seconds / messages * 1e6:.1f} µs/msg)"
            for name, seconds in self.cpu.items()
        )
        used = sum(self.cpu.values())
        return (
            f"CPU {parts}; {used:.1f} of {cores * self.seconds:.1f} core-seconds "
            f"({used / (cores * self.seconds):.0%} of {cores} cores)\n"
            f"  {servers.counters_line(self.url, self.server, messages, 'msg')}"
        )


def fill(url: str, rows: int) -> float:
    """`rows` pending rows in the outbox; seconds it took."""
    engine = get_engine(url)
    topic = topic_of(PROPERTY_OBJECT_UPSERTED)
    started = time.perf_counter()
    chunk = 200_000
    for first in range(0, rows, chunk):
        with engine.begin() as conn:
            conn.execute(
                text(FILL_SQL),
                {
                    "topic": topic,
                    "keys": max(1, rows // 10),
                    "first": first,
                    "last": min(rows, first + chunk) - 1,
                },
            )
    return time.perf_counter() - started


def raw_producer(
    url: str, bootstrap: str, broker_pid: int | None, chunk: int = 50_000, limit: int | None = None
) -> dict:
    """The pending rows as the relay sends them, produced by a bare producer (the baseline)."""
    engine = get_engine(url)
    query = queries("outbox")["outbox_pending_batch"]
    messages: list[tuple[str, bytes, str, list]] = []
    after = 0
    with engine.connect() as conn:
        conn.execute(queries("outbox")["outbox_relay_session"])  # the relay's plan: a walk of the primary key
        while rows := conn.execute(query, {"after": after, "upto": 2**63 - 1, "limit": chunk}).all():
            values = message_values([row[3] for row in rows])
            messages.extend(
                (row[1], value, row[2], headers)
                for row, value, headers in zip(rows, values, batch_headers(rows), strict=True)
            )
            after = rows[-1][0]
            if limit is not None and len(messages) >= limit:  # the first `limit` rows only
                del messages[limit:]
                break
    ensure_topics(bootstrap)
    errors: list[str] = []
    producer = Producer(
        producer_config(
            bootstrap,
            **{"delivery.report.only.error": True, "on_delivery": lambda e, _m: errors.append(e.str())},
        )
    )
    producer.list_topics(timeout=10)  # connected before the clock starts
    with CpuMeter(url, broker_pid) as meter:
        started = time.perf_counter()
        produce = producer.produce
        for topic, value, key, headers in messages:
            while True:
                try:
                    produce(topic, value, key, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.05)
        left = producer.flush(120)
        seconds = time.perf_counter() - started
    if left or errors:
        raise SystemExit(f"raw producer: {left} unacknowledged, {len(errors)} failed ({errors[:1]})")
    return {
        "rows": len(messages),
        "seconds": round(seconds, 2),
        "messages_per_second": round(len(messages) / seconds),
        "cpu": meter.line(len(messages)),
    }


def throughput(
    url: str, bootstrap: str, broker_pid: int | None, rows: int, batch_size: int, fill_seconds: float
) -> dict:
    engine = get_engine(url)
    with OutboxRelay(engine, bootstrap, batch_size=batch_size) as relay:
        relay.prepare()  # topics ensured and the producer connected before the clock starts, as the raw one's
        with CpuMeter(url, broker_pid) as meter:
            result = relay.relay_pending(until_empty=True, max_seconds=3600)
    with engine.connect() as conn:
        left = conn.execute(
            text("SELECT count(*) FROM chessboard.outbox_messages WHERE published_at IS NULL")
        ).scalar_one()
    if left or result.published != rows:
        raise SystemExit(f"relay left {left} rows pending, published {result.published} of {rows}")
    return {
        "rows": rows,
        "fill_seconds": round(fill_seconds, 2),
        "relay_seconds": round(result.seconds, 2),
        "messages_per_second": round(result.messages_per_second),
        "batches": result.batches,
        "cpu": meter.line(rows),
    }


def lag(url: str, bootstrap: str, seconds: float, rate: float) -> dict[str, float]:
    engine = get_engine(url)
    topic = topic_of(PROPERTY_OBJECT_UPSERTED)
    ensure_topics(bootstrap)
    committed: dict[str, float] = {}
    arrived: dict[str, float] = {}
    done = threading.Event()
    consumer = probe_consumer(bootstrap)
    partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    ends = end_offsets(consumer, [(topic, p) for p in partitions])
    consumer.assign([TopicPartition(topic, p, ends[(topic, p)][1]) for p in partitions])

    def consume() -> None:
        while not done.is_set() or not committed.keys() <= arrived.keys():
            for message in consumer.consume(500, 0.05):
                if message.error() is None:
                    now = time.perf_counter()
                    headers = dict(message.headers() or [])
                    arrived.setdefault(headers["messageId"].decode(), now)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    relay = OutboxRelay(engine, bootstrap)

    def commit_and_relay() -> str:
        event = OutboxEvent(
            PROPERTY_OBJECT_UPSERTED,
            str(uuid.uuid4()),
            {"id": "x", "version": 1},
            correlation_id="outbox-bench",
        )
        with engine.begin() as conn:
            write_outbox(conn, [event])
        committed[str(event.message_id)] = time.perf_counter()
        relay.relay_pending()  # the fast path after a commit
        return str(event.message_id)

    warm = commit_and_relay()  # producer connected and consumer fetching before measuring
    deadline = time.monotonic() + 30
    while warm not in arrived and time.monotonic() < deadline:
        time.sleep(0.01)
    del committed[warm]
    interval = 1.0 / rate
    started = next_at = time.perf_counter()
    while time.perf_counter() < started + seconds:
        commit_and_relay()
        next_at += interval
        pause = next_at - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    elapsed = time.perf_counter() - started
    done.set()
    reader.join(timeout=30)
    relay.close()
    consumer.close()
    lags = sorted((arrived[m] - committed[m]) * 1000 for m in committed if m in arrived)
    if len(lags) < len(committed):
        raise SystemExit(f"{len(committed) - len(lags)} messages never arrived")
    return {
        "messages": len(lags),
        "rate": round(len(lags) / elapsed),
        "p50_ms": round(statistics.median(lags), 1),
        "p99_ms": round(lags[min(len(lags) - 1, int(len(lags) * 0.99))], 1),
        "max_ms": round(lags[-1], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="outbox rows for the throughput run")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--lag-seconds", type=float, default=10.0)
    parser.add_argument("--lag-rate", type=float, default=200.0, help="commits per second in the lag run")
    servers.add_pg_setting_argument(parser)
    args = parser.parse_args()
    servers.check_pg_settings(parser, args)
    url, bootstrap = _database(args), _broker(args)
    tansu = getattr(args, "_tansu", None)
    broker_pid = None if tansu is None else tansu.pid
    try:
        fill_seconds = fill(url, args.rows)
        raw = raw_producer(url, bootstrap, broker_pid)
        print(
            f"raw producer (baseline): {raw['rows']} messages in {raw['seconds']} s = "
            f"{raw['messages_per_second']} messages/s\n  {raw['cpu']}"
        )
        t = throughput(url, bootstrap, broker_pid, args.rows, args.batch_size, fill_seconds)
        print(
            f"relay throughput: {t['rows']} rows in {t['relay_seconds']} s = {t['messages_per_second']} messages/s "
            f"({t['batches']} batches of {args.batch_size}; fill {t['fill_seconds']} s); "
            f"relay/raw = {t['messages_per_second'] / raw['messages_per_second']:.2f}x; "
            f"target >= 50000 -> {t['messages_per_second'] / 50000:.2f}x\n  {t['cpu']}"
        )
        lg = lag(url, bootstrap, args.lag_seconds, args.lag_rate)
        print(
            f"lag commit -> consumed ({lg['messages']} messages, one per transaction, {lg['rate']}/s, fast path): "
            f"p50 {lg['p50_ms']} ms, p99 {lg['p99_ms']} ms, max {lg['max_ms']} ms"
        )
    finally:
        tansu = getattr(args, "_tansu", None)
        if tansu is not None:
            tansu.terminate()
            tansu.wait()
        server = getattr(args, "_pg", None)
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()

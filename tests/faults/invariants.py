"""What must hold after any fault once the commands were run again to the end.

Every check returns a list of violations (empty = holds), so a test prints all of them at once and
the fault report can say what each one showed.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

COLLECTION_TABLES = {
    "developers": "developers",
    "projects": "projects",
    "buildings": "buildings",
    "layout-groups": "layout_groups",
    "layouts": "layouts",
    "property-objects": "property_objects",
}
STAGE_OF_COLLECTION = {
    "developers": "Developers",
    "projects": "Projects",
    "buildings": "Buildings",
    "layout-groups": "LayoutGroups",
    "layouts": "Layouts",
    "property-objects": "PropertyObjects",
}


@dataclass
class Report:
    """Violations by invariant; `facts` are the figures the checks saw (for the fault report)."""

    violations: dict[str, list[str]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, problems: list[str]) -> None:
        self.violations[name] = problems

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def __str__(self) -> str:
        lines = [f"facts: {json.dumps(self.facts, default=str)}"]
        for name, problems in self.violations.items():
            lines.append(f"{name}: {'ok' if not problems else f'{len(problems)} violation(s)'}")
            lines.extend(f"  {p}" for p in problems[:20])
        return "\n".join(lines)


def _rows(url: str, sql: str, **params: Any) -> list[sa.Row]:
    with get_engine(url).connect() as conn:
        return list(conn.execute(sa.text(sql), params))


def source_ids(spec: DatasetSpec) -> dict[str, set[str]]:
    """Talent ids of every collection of the simulator's dataset."""
    return {
        collection: {item["id"] for item in dataset.iter_items(spec, collection)}
        for collection in COLLECTION_TABLES
    }


def replica_matches_source(url: str, spec: DatasetSpec) -> list[str]:
    """Every source item is in the replica or quarantined; the replica holds nothing else; the
    replica's count equals the source's count minus the quarantined items."""
    problems = []
    quarantined: dict[str, set[str]] = defaultdict(set)
    for stage, external_id in _rows(
        url, "SELECT DISTINCT stage, external_id::text FROM chessboard.talent_import_failed_items"
    ):
        quarantined[stage].add(external_id)
    for collection, ids in source_ids(spec).items():
        table = COLLECTION_TABLES[collection]
        replica = {r[0] for r in _rows(url, f"SELECT external_talent_id::text FROM chessboard.{table}")}
        poisoned = quarantined[STAGE_OF_COLLECTION[collection]] - replica
        missing = ids - replica - poisoned
        extra = replica - ids
        if missing:
            problems.append(f"{table}: {len(missing)} source item(s) missing, e.g. {sorted(missing)[:3]}")
        if extra:
            problems.append(f"{table}: {len(extra)} row(s) not in the source, e.g. {sorted(extra)[:3]}")
        if len(replica) != len(ids) - len(poisoned & ids):
            problems.append(f"{table}: {len(replica)} row(s), source {len(ids)}, quarantined {len(poisoned)}")
    return problems


def no_duplicate_external_ids(url: str) -> list[str]:
    problems = []
    for table in COLLECTION_TABLES.values():
        for external_id, n in _rows(
            url,
            f"SELECT external_talent_id::text, count(*) FROM chessboard.{table} "
            "GROUP BY external_talent_id HAVING count(*) > 1",
        ):
            problems.append(f"{table}: {external_id} stored {n} times")
    return problems


def every_page_done(url: str, run_id: str | None = None) -> list[str]:
    """Every page of the run (default: of every run) is Done, and the run is Completed."""
    where = "" if run_id is None else "WHERE run_id = CAST(:run_id AS uuid)"
    problems = [
        f"run {r} stage {s} page {p}: {st}"
        for r, s, p, st in _rows(
            url,
            f"SELECT run_id, stage, page_no, status FROM chessboard.talent_import_pages {where} "
            "ORDER BY run_id, stage, page_no",
            run_id=run_id,
        )
        if st != "Done"
    ]
    where_run = "" if run_id is None else "WHERE id = CAST(:run_id AS uuid)"
    for r, status in _rows(
        url, f"SELECT id, status FROM chessboard.talent_import_runs {where_run}", run_id=run_id
    ):
        if status != "Completed" and (run_id is not None or status == "Running"):
            problems.append(f"run {r}: {status}")
    return problems


def applied_once(url: str) -> list[str]:
    """Nothing applied twice: developers and property objects (the rows the recalc never
    republishes) are at version 1 after one import of one generation, with exactly one upserted
    event each in the outbox."""
    problems = []
    for table in ("developers", "property_objects"):
        rows = _rows(
            url,
            f"""
            SELECT t.id::text, t.version, count(o.id) AS events
            FROM chessboard.{table} t
            LEFT JOIN chessboard.outbox_messages o
              ON o.message_key = t.id::text AND o.topic = :topic
            GROUP BY t.id, t.version
            HAVING t.version <> 1 OR count(o.id) <> 1
            """,
            topic=f"pin.chessboard.{_event_name(table)}-upserted.v1",
        )
        problems.extend(f"{table} {i}: version {v}, {n} upserted event(s)" for i, v, n in rows[:10])
    return problems


def _event_name(table: str) -> str:
    return {"layout_groups": "layout-group", "property_objects": "property-object"}.get(table, table[:-1])


def audit_clean(url: str) -> list[str]:
    """No aggregate divergence and no pending recalc row (call after a drain)."""
    from pin_chessboard_pipelines.recalc.audit import audit

    with get_engine(url).connect() as conn:
        divergences = audit(conn)
    pending = _rows(url, "SELECT project_id::text, attempt_count FROM chessboard.project_recalc_requests")
    return [d.line() for d in divergences] + [f"recalc row left: {p} attempts={a}" for p, a in pending]


def one_request_per_project(url: str, project_ids: Iterable[str] | None = None) -> list[str]:
    """After an import into an empty queue: one row per touched project, requested_count = 1."""
    rows = _rows(url, "SELECT project_id::text, requested_count FROM chessboard.project_recalc_requests")
    problems = [f"project {p}: requested_count {n}" for p, n in rows if n != 1]
    if project_ids is not None:
        queued = {p for p, _ in rows}
        missing = set(project_ids) - queued
        problems.extend(f"project {p}: no recalc request" for p in sorted(missing))
    return problems


# -- Kafka


def read_topics(bootstrap: str, topics: list[str], timeout: float = 60.0) -> list[dict[str, Any]]:
    """Every message of `topics` from the beginning, in partition order: topic, partition, offset,
    key, headers, payload."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"fault-suite-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(timeout=20)
        assignment = [
            TopicPartition(topic, p, 0)
            for topic in topics
            if topic in metadata.topics
            for p in metadata.topics[topic].partitions
        ]
        if not assignment:
            return []
        consumer.assign(assignment)
        pending = {(tp.topic, tp.partition) for tp in assignment}
        messages: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard((message.topic(), message.partition()))
                continue
            messages.append(
                {
                    "topic": message.topic(),
                    "partition": message.partition(),
                    "offset": message.offset(),
                    "key": (message.key() or b"").decode(),
                    "headers": {k: (v or b"").decode() for k, v in (message.headers() or [])},
                    "payload": json.loads(message.value()) if message.value() else None,
                }
            )
        if pending:
            raise AssertionError(f"could not read to the end of {sorted(pending)} within {timeout:.0f}s")
        return messages
    finally:
        consumer.close()


def outbox_on_kafka(url: str, bootstrap: str) -> list[str]:
    """Every outbox row is published and on Kafka at least once (by messageId, on its topic and key),
    and per (topic, key) the payload `version` never decreases in offset order."""
    rows = _rows(
        url,
        "SELECT message_id::text, topic, message_key, published_at IS NOT NULL FROM chessboard.outbox_messages",
    )
    problems = [f"outbox row {m} ({t}) not published" for m, t, _, published in rows if not published]
    topics = sorted({t for _, t, _, _ in rows})
    messages = read_topics(bootstrap, topics)
    seen = {(m["headers"].get("messageId"), m["topic"], m["key"]) for m in messages}
    missing = [(m, t, k) for m, t, k, _ in rows if (m, t, k) not in seen]
    problems.extend(f"outbox row {m} ({t}, key {k}) not on Kafka" for m, t, k in missing[:20])
    if len(missing) > 20:
        problems.append(f"... {len(missing)} outbox row(s) missing on Kafka in all")
    last: dict[tuple[str, str], tuple[int, int]] = {}
    for message in sorted(messages, key=lambda m: (m["topic"], m["partition"], m["offset"])):
        payload = message["payload"] or {}
        version = payload.get("version")
        if version is None:
            continue
        key = (message["topic"], message["key"])
        previous = last.get(key)
        if previous is not None and version < previous[0]:
            problems.append(
                f"{key[0]} key {key[1]}: version {version} at offset {message['offset']} "
                f"after {previous[0]} at offset {previous[1]}"
            )
        last[key] = (version, message["offset"])
    return problems


def check_all(
    url: str,
    spec: DatasetSpec,
    *,
    bootstrap: str | None = None,
    run_id: str | None = None,
    audit: bool = True,
) -> Report:
    report = Report()
    report.add("replica equals source", replica_matches_source(url, spec))
    report.add("no duplicate external id", no_duplicate_external_ids(url))
    report.add("every page Done", every_page_done(url, run_id))
    if audit:
        report.add("audit 0 after drain", audit_clean(url))
    if bootstrap is not None:
        report.add(
            "every outbox row on Kafka, versions non-decreasing per key", outbox_on_kafka(url, bootstrap)
        )
    report.facts = facts(url)
    print(report)  # what the invariants showed, for the fault report (pytest -rP)
    return report


def facts(url: str) -> dict[str, Any]:
    counts = {}
    for table in (*COLLECTION_TABLES.values(), "talent_import_failed_items", "outbox_messages"):
        counts[table] = _rows(url, f"SELECT count(*) FROM chessboard.{table}")[0][0]
    counts["runs"] = [
        f"{r[0]}:{r[1]}"
        for r in _rows(url, "SELECT status, count(*) FROM chessboard.talent_import_runs GROUP BY 1")
    ]
    counts["pages"] = [
        f"{r[0]}:{r[1]}"
        for r in _rows(url, "SELECT status, count(*) FROM chessboard.talent_import_pages GROUP BY 1")
    ]
    counts["recalc_rows"] = _rows(url, "SELECT count(*) FROM chessboard.project_recalc_requests")[0][0]
    return counts

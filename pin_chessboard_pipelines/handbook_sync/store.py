"""handbook-sync's database I/O (store/sql/handbook.sql), each function on the caller's transaction:
applying a poll batch of values under the version guard, requesting the republish of renamed
regions / cities, and one republish batch.

A republish batch is a constant number of statements whatever its size: the handbook read under
its shared lock, lock the pending row, one UPDATE ... RETURNING of the next `batch_size` live
projects (version + 1), one COPY of their project-upserted events into the outbox, one UPDATE of
the cursor (or the DELETE of the finished pending row).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.errors import SYNC_VALIDATION_FAILED
from pin_chessboard_pipelines.events import payloads
from pin_chessboard_pipelines.events.outbox import write_outbox_batch
from pin_chessboard_pipelines.handbook_sync.values import HandbookValue, InvalidValue, Kind, Rename, renames
from pin_chessboard_pipelines.replica.batch import Quarantine
from pin_chessboard_pipelines.replica.context import STREAMING_RUN_ID
from pin_chessboard_pipelines.replica.quarantine import insert_failed_items
from pin_chessboard_pipelines.store.cursor import Cursor, Statement, begin, with_identifiers
from pin_chessboard_pipelines.store.handbook import REGION_COUNTRY_ID
from pin_chessboard_pipelines.store.handbook_replica import HANDBOOK_CHANGE_LOCK, load_handbook_for_publish
from pin_chessboard_pipelines.store.queries import queries


@dataclass
class Applied:
    """What one poll batch did to the replica."""

    applied: int = 0  # values stored (created or changed)
    skipped: int = 0  # not newer than the replica
    failed: int = 0  # quarantined
    quarantined: int = 0  # of `failed`, rows written (a batch read again quarantines nothing twice)
    created: int = 0  # ids the handbook did not know
    renames: list[Rename] | None = None
    by_topic: dict[str, dict[str, int]] | None = None  # topic -> {applied, skipped}


@dataclass(frozen=True)
class Pending:
    kind: Kind
    handbook_id: int
    handbook_version: int
    after_project_id: str | None
    republished: int
    batches: int


@dataclass
class BatchDone:
    kind: Kind
    handbook_id: int
    projects: int
    finished: bool
    seconds: float  # of the statements, the caller's commit not included
    republished_total: int  # of the whole republish so far, this batch included
    batches_total: int


def _rows(conn: Connection, sql: Statement, params: dict[str, Any]) -> list[dict[str, Any]]:
    begin(conn)
    with Cursor(conn) as cur:
        cur.execute(sql, params)
        return cur.fetch_rows()


def _execute(conn: Connection, sql: Statement, params: dict[str, Any]) -> None:
    begin(conn)
    with Cursor(conn) as cur:
        cur.execute(sql, params)


def apply_values(
    conn: Connection, values: Sequence[HandbookValue], invalid: Sequence[InvalidValue], correlation_id: str
) -> Applied:
    """Stores the batch's newest values (values.newest) and quarantines the invalid ones; takes
    HANDBOOK_CHANGE_LOCK exclusively first, so that the renames and their first republish batch
    commit before any other producer reads the handbook again."""
    result = Applied(failed=len(invalid), renames=[], by_topic={})
    HANDBOOK_CHANGE_LOCK.lock_transaction(conn)
    sql = queries("handbook")
    for kind in Kind:
        mine = [v for v in values if v.kind is kind]
        if not mine:
            continue
        params: dict[str, Any] = {
            "ids": [v.id for v in mine],
            "names": [v.name for v in mine],
            "versions": [v.version for v in mine],
        }
        if kind is Kind.REGION:
            params["country_id"] = REGION_COUNTRY_ID
            rows = _rows(conn, sql["upsert_regions"], params)
        else:
            params["region_ids"] = [v.region_id for v in mine]
            rows = _rows(conn, sql["upsert_cities"], params)
        result.applied += len(rows)
        result.skipped += len(mine) - len(rows)
        assert result.by_topic is not None
        result.by_topic[kind.topic] = {"applied": len(rows), "skipped": len(mine) - len(rows)}
        result.created += sum(1 for r in rows if r["inserted"])
        renamed = renames(kind, rows)
        result.renames = [*(result.renames or []), *renamed]
        if renamed:
            _execute(
                conn,
                sql["request_republish"],
                {
                    "kind": kind.value,
                    "ids": [r.id for r in renamed],
                    "versions": [r.version for r in renamed],
                },
            )
    for kind in Kind:
        rows_of_kind = [
            Quarantine(
                i,
                q.raw if q.raw is not None else {"key": q.key},
                q.key,
                SYNC_VALIDATION_FAILED,
                q.message,
                q.source,
            )
            for i, q in enumerate(invalid)
            if q.kind is kind
        ]
        result.quarantined += len(insert_failed_items(conn, STREAMING_RUN_ID, kind.stage, rows_of_kind))
    return result


def pending_republishes(conn: Connection) -> list[Pending]:
    rows = _rows(conn, queries("handbook")["pending_republishes"], {})
    return [_pending(r) for r in rows]


def _pending(row: dict[str, Any]) -> Pending:
    return Pending(
        Kind(row["kind"]),
        int(row["handbook_id"]),
        int(row["handbook_version"]),
        None if row["after_project_id"] is None else str(row["after_project_id"]),
        int(row["republished"]),
        int(row["batches"]),
    )


def republish_batch(
    conn: Connection, kind: Kind, handbook_id: int, batch_size: int, correlation_id: str
) -> BatchDone | None:
    """The next batch of the pending republish of (kind, id); None when nothing is pending."""
    started = time.perf_counter()
    sql = queries("handbook")
    key = {"kind": kind.value, "handbook_id": handbook_id}
    # lock order of every producer: the handbook (shared), then the pending row, then projects
    handbook = load_handbook_for_publish(conn)
    locked = _rows(conn, sql["lock_republish"], key)
    if not locked:
        return None
    pending = _pending(locked[0])
    rows = _rows(
        conn,
        with_identifiers(sql["republish_projects"], column=kind.column),
        {"handbook_id": handbook_id, "after_project_id": pending.after_project_id, "batch_size": batch_size},
    )
    rows.sort(key=lambda r: r["id"])  # outbox order = id order, as the cursor walks
    events = [
        (payloads.PROJECT_UPSERTED, str(row["id"]), payloads.project_upserted(row, handbook)) for row in rows
    ]
    write_outbox_batch(conn, events, correlation_id)
    finished = len(rows) < batch_size
    if finished:
        _execute(conn, sql["finish_republish"], key)
    else:
        _execute(
            conn,
            sql["advance_republish"],
            {**key, "after_project_id": str(rows[-1]["id"]), "republished": len(rows)},
        )
    return BatchDone(
        kind,
        handbook_id,
        len(rows),
        finished,
        time.perf_counter() - started,
        pending.republished + len(rows),
        pending.batches + 1,
    )

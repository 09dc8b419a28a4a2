"""Quarantine rows (talent_import_failed_items): the raw snapshot kept with its error, in batch order."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.events import exact_json
from pin_chessboard_pipelines.replica.batch import Quarantine
from pin_chessboard_pipelines.store.cursor import Cursor, array_literal
from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.talent.topic_reader import SOURCE


def insert_failed_items(
    conn: Connection, run_id: UUID, stage: str, rows: Sequence[Quarantine]
) -> list[Quarantine]:
    """One INSERT of the rows in the caller's transaction (counted in chessboard_import_failed_items_total
    by the caller once that transaction committed: observability.metrics.count_applied). Returns the
    rows written: a row of a message the run quarantined already (the same topic, partition and
    offset: a batch read again) is not written twice."""
    if not rows:
        return []
    written = _stage_rows(
        conn,
        "insert_failed_items",
        run_id,
        stage,
        external_ids=[q.external_id for q in rows],
        error_codes=[q.code for q in rows],
        error_messages=[q.message for q in rows],
        payloads=[payload_json(q.raw) for q in rows],
        source_topics=[None if q.source is None else q.source.topic for q in rows],
        source_partitions=[None if q.source is None else q.source.partition for q in rows],
        source_offsets=[None if q.source is None else q.source.offset for q in rows],
    )
    sources = {(r["source_topic"], r["source_partition"], r["source_offset"]) for r in written}
    return [q for q in rows if q.source is None or tuple(q.source) in sources]


def take_waiting_items(
    conn: Connection, run_id: UUID, stage: str, code: str, field: str, parent_ids: Sequence[str]
) -> list[dict[str, Any]]:
    """The quarantine rows of `run_id` and `stage` with error `code` whose snapshot names one of
    `parent_ids` in `field`, deleted; returned in the order they were quarantined, each as its
    item again (decimals with their digits, the message it was read from under SOURCE)."""
    if not parent_ids:
        return []
    ids = array_literal(sorted({i.lower() for i in parent_ids}), text=True)
    rows = _stage_rows(conn, "take_waiting_items", run_id, stage, code=code, field=field, ids=ids)
    items = []
    for row in sorted(rows, key=lambda r: r["id"]):
        item = json.loads(row["payload"], parse_float=Decimal)
        if not isinstance(item, dict):
            continue
        if row["source_offset"] is not None:
            item[SOURCE] = [row["source_topic"], row["source_partition"], row["source_offset"]]
        items.append(item)
    return items


def _stage_rows(
    conn: Connection, query: str, run_id: UUID, stage: str, **params: Any
) -> list[dict[str, Any]]:
    """What replica.sql's `query` on the quarantine rows of `run_id` and `stage` returns."""
    with Cursor(conn) as cur:
        cur.execute(queries("replica")[query], {"run_id": str(run_id), "stage": stage, **params})
        return cur.fetch_rows()


def payload_json(raw: Any) -> str:
    """The raw snapshot as jsonb text, its decimals with their digits; jsonb holds neither \\u0000
    nor lone surrogates."""
    if isinstance(raw, Mapping) and SOURCE in raw:  # where it was read: the row's source columns
        raw = {k: v for k, v in raw.items() if k != SOURCE}
    text = _dumps(raw)
    if "\\u0000" in text or not text.isascii():
        text = _dumps(_clean(raw))
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _dumps(value: Any) -> str:
    try:
        return exact_json.dumps(value)
    except (TypeError, ValueError):  # not JSON data (a broken source): its text
        return json.dumps(value, ensure_ascii=False, default=str)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, Mapping):
        return {str(k).replace("\x00", "\ufffd"): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value

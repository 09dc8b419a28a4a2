"""The replica as the apply path's view: set-based reads and writes on the caller's transaction.

Per batch a constant number of statements (store/sql/replica.sql): the current rows of the batch's
ids, one query per parent table, the live-number holders (property objects), one multi-row upsert,
then one INSERT of the quarantine rows, one COPY of the outbox rows and one `enqueue_recalc`.
Column values go as one array literal per column (`unnest`), never one round trip per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.events.outbox import write_outbox_batch
from pin_chessboard_pipelines.events.payloads import UPSERTED_PAYLOADS
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from pin_chessboard_pipelines.replica import rules
from pin_chessboard_pipelines.replica.batch import Batch, Event, Item
from pin_chessboard_pipelines.replica.columns import EXISTING, TEXT_COLUMNS, ReplicaEntity
from pin_chessboard_pipelines.replica.context import STREAMING_RUN_ID
from pin_chessboard_pipelines.replica.quarantine import insert_failed_items
from pin_chessboard_pipelines.replica.rules import NumberKey
from pin_chessboard_pipelines.store.cursor import Cursor, array_literal, begin
from pin_chessboard_pipelines.store.queries import cursor_queries


class DatabaseView:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def session(self) -> AbstractContextManager[object]:
        begin(self.conn)
        return nullcontext()

    def _rows(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with Cursor(self.conn) as cur:
            cur.execute(query, params)
            return cur.fetch_rows()

    def existing_rows(self, spec: ReplicaEntity, talent_ids: list[str]) -> dict[str, dict[str, Any]]:
        columns = ", ".join(f'"{c}"' for c in (*EXISTING, *spec.existing_columns))
        query = cursor_queries("replica")["existing_rows"].format(table=spec.entity.table, columns=columns)
        return {row["external_talent_id"]: row for row in self._rows(query, {"ids": talent_ids})}

    def parent_rows(self, parent: Entity, column: str, items: Sequence[Item]) -> dict[str, dict[str, Any]]:
        ids = sorted({item.values[column] for item in items if item.values.get(column) is not None})
        if not ids:
            return {}
        query = cursor_queries("replica")["parent_rows"].format(table=parent.table)
        return {row["id"]: row for row in self._rows(query, {"ids": ids})}

    def live_number_holders(self, keys: list[NumberKey]) -> dict[NumberKey, str | None]:
        with Cursor(self.conn) as cur:
            cur.execute(
                cursor_queries("replica")["live_number_holders"],
                {"building_ids": [k[0] for k in keys], "numbers": [k[1] for k in keys]},
            )
            return {(building_id, number): holder for building_id, number, holder in cur.fetchall()}

    def keep_numbers(self, taken: dict[NumberKey, str | None]) -> None:
        """The replica's unique index keeps them."""

    def store(self, batch: Batch, decided: list[Item]) -> None:
        spec, name = batch.spec, batch.spec.name
        params = {
            column: array_literal([item.values[column] for item in decided], column in TEXT_COLUMNS)
            for column in spec.upsert_columns
        }
        rows = self._rows(cursor_queries("replica")[f"upsert_{spec.entity.table}"], params)
        returned = {row["external_talent_id"]: row for row in rows}
        payload, event_type, handbook = (
            UPSERTED_PAYLOADS[name],
            spec.entity.upserted_event,
            batch.ctx.handbook,
        )
        for item in decided:
            row = returned.get(item.talent_id)
            if row is None:  # a concurrent writer applied a newer version in between
                batch.skipped(item.tenant)
                continue
            inserted = row.pop("inserted")
            batch.applied(item.record, created=bool(inserted), tenant=item.tenant)
            if not inserted and item.old is not None and row["version"] == item.old["version"]:
                # mapped fields equal: replica_version / last_synced_at moved, nothing to publish
                # and nothing to recalculate (docs/store.md#replica-tables)
                continue
            key = str(row["id"])
            batch.events.append(Event(event_type, key, payload(row, handbook)))
            if name == "propertyObject":
                for change_type, change in rules.object_change_events(row, None if inserted else item.old):
                    batch.events.append(Event(change_type, key, change))
            batch.touch_all(rules.touched_projects(name, row, None if inserted else item.old))

    def delete(self, batch: Batch, talent_ids: list[str]) -> None:
        spec, name = batch.spec, batch.spec.name
        queries = cursor_queries("replica")
        query = (
            queries["tombstone_projects"]
            if name == "project"  # a deleted project is archived
            else queries["tombstone_rows"].format(table=spec.entity.table)
        )
        rows = self._rows(query, {"ids": talent_ids})
        payload, event_type = UPSERTED_PAYLOADS[name], spec.entity.upserted_event
        for row in rows:
            batch.events.append(Event(event_type, str(row["id"]), payload(row, batch.ctx.handbook)))
            batch.touch_all(rules.touched_projects(name, row, None))
        batch.result.applied = len(rows)

    def request_recalcs(self, batch: Batch, projects: dict[str, str]) -> None:
        """Queue rows first, replica rows after: the drain locks a project's queue row and then its
        rows, so writers take them in the same order and neither waits for the other in a cycle."""
        self._enqueue(batch, projects)
        batch.requested.update(projects)

    def write(self, batch: Batch) -> None:
        ctx, result = batch.ctx, batch.result
        insert_failed_items(self.conn, ctx.run_id or STREAMING_RUN_ID, batch.stage, batch.quarantine)
        result.events = write_outbox_batch(self.conn, batch.events, ctx.correlation_id)
        # requested up front already, unless a later round of the batch touched another project
        late = {p: t for p, t in batch.touched.items() if p not in batch.requested}
        if late:
            self._enqueue(batch, late)

    def _enqueue(self, batch: Batch, projects: dict[str, str]) -> None:
        if not projects:
            return
        ctx = batch.ctx
        enqueue_recalc(
            self.conn,
            [(UUID(p), UUID(t)) for p, t in projects.items()],
            RecalcReason.TALENT_SYNC,
            debounce_seconds=ctx.debounce_seconds,
            cap_seconds=ctx.cap_seconds,
            run_id=ctx.run_id,
        )

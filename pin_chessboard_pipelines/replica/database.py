"""The replica as the apply path's view: set-based reads and writes on the caller's transaction.

Per batch a constant number of statements (store/sql/replica.sql, and the upsert written from the
entity's declaration, store/replica_upserts.py): the current rows of the batch's
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

from pin_chessboard_pipelines.entities import BY_NAME, PROPERTY_OBJECT, Entity
from pin_chessboard_pipelines.events.outbox import write_outbox_batch
from pin_chessboard_pipelines.events.payloads import upserted_payload
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from pin_chessboard_pipelines.replica import rules
from pin_chessboard_pipelines.replica.batch import Batch, Event, Item
from pin_chessboard_pipelines.replica.columns import EXISTING, ReplicaEntity
from pin_chessboard_pipelines.replica.context import STREAMING_RUN_ID
from pin_chessboard_pipelines.replica.quarantine import insert_failed_items
from pin_chessboard_pipelines.replica.rules import NumberKey
from pin_chessboard_pipelines.store.cursor import Cursor, Statement, array_literal, begin, with_identifiers
from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.talent.topic_reader import Source


class DatabaseView:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        # table -> PIN id -> (project, tenant) of the parent rows this batch read: linked_projects
        # takes them from here instead of reading the same rows again
        self._parent_projects: dict[str, dict[str, tuple[str, str]]] = {}

    def session(self) -> AbstractContextManager[object]:
        begin(self.conn)
        return nullcontext()

    def _rows(self, query: Statement, params: dict[str, Any]) -> list[dict[str, Any]]:
        with Cursor(self.conn) as cur:
            cur.execute(query, params)
            return cur.fetch_rows()

    def existing_rows(
        self, spec: ReplicaEntity, talent_ids: list[str], also: tuple[str, ...] = ()
    ) -> dict[str, dict[str, Any]]:
        """Talent id -> current row: EXISTING, the entity's existing columns and `also`."""
        wanted = dict.fromkeys((*EXISTING, *spec.existing_columns, *also))
        query = with_identifiers(
            queries("replica")["existing_rows"], table=spec.entity.table, columns=list(wanted)
        )
        return {
            row["external_talent_id"]: row for row in self._rows(query, {"ids": array_literal(talent_ids)})
        }

    def parent_rows(self, parent: Entity, column: str, items: Sequence[Item]) -> dict[str, dict[str, Any]]:
        ids = sorted({item.values[column] for item in items if item.values.get(column) is not None})
        if not ids:
            return {}
        query = with_identifiers(queries("replica")["parent_rows"], table=parent.table)
        rows = {row["id"]: row for row in self._rows(query, {"ids": array_literal(ids)})}
        if rows and "project_id" in next(iter(rows.values())):
            self._parent_projects.setdefault(parent.table, {}).update(
                (i, (row["project_id"], row["tenant_id"])) for i, row in rows.items()
            )
        return rows

    def linked_projects(self, parent: Entity, ids: set[str]) -> dict[str, tuple[str, str]]:
        """PIN id -> (project, tenant) of the rows of `parent` with these ids: those the batch read
        as parents already, the others read now."""
        known = self._parent_projects.get(parent.table, {})
        found = {i: known[i] for i in ids if i in known}
        missing = ids - found.keys()
        if missing:
            query = with_identifiers(queries("replica")["rows_by_id"], table=parent.table)
            rows = self._rows(query, {"ids": array_literal(sorted(missing))})
            found.update((row["id"], (row["project_id"], row["tenant_id"])) for row in rows)
        return found

    def live_number_holders(self, keys: list[NumberKey]) -> dict[NumberKey, str | None]:
        with Cursor(self.conn) as cur:
            cur.execute(
                queries("replica")["live_number_holders"],
                {
                    "building_ids": array_literal([k[0] for k in keys]),
                    "numbers": array_literal([k[1] for k in keys], text=True),
                },
            )
            return {(building_id, number): holder for building_id, number, holder in cur.fetchall()}

    def keep_numbers(self, taken: dict[NumberKey, str | None]) -> None:
        """The replica's unique index keeps them."""

    def store(self, batch: Batch, decided: list[Item]) -> None:
        spec, name = batch.spec, batch.spec.name
        text = spec.text_columns
        arrays = {
            column: array_literal([item.values[column] for item in decided], column in text)
            for column in spec.upsert_columns
        }
        upsert = spec.upsert  # written from the entity's declaration (store/replica_upserts.py)
        rows = self._rows(upsert.sql, upsert.parameters(arrays))
        returned = {row["external_talent_id"]: row for row in rows}
        payload, event_type, handbook = (
            upserted_payload(name),
            spec.entity.upserted_event,
            batch.ctx.handbook,
        )
        moved: list[tuple[str, str, str]] = []
        linked: set[str] = set()
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
            old = None if inserted else item.old
            key = str(row["id"])
            batch.events.append(Event(event_type, key, payload(row, handbook)))
            if name == "propertyObject":
                for change_type, change in rules.object_change_events(row, old):
                    batch.events.append(Event(change_type, key, change))
            batch.touch_all(rules.touched_projects(name, row, old))
            linked |= rules.linked_parent_ids(spec.entity, row, old)
            if name == "building" and (move := rules.moved_building(row, old)) is not None:
                moved.append(move)
        self._touch_linked(batch, linked)
        if moved:
            self._carry_building_objects(batch, moved)

    def _touch_linked(self, batch: Batch, linked: set[str]) -> None:
        """The projects of the layouts / groups a change linked or unlinked (read up front, but a
        later round of the batch may name others)."""
        missing = linked - batch.linked.keys()
        extra = batch.spec.entity.extra_parent
        if missing and extra is not None:
            batch.linked.update(self.linked_projects(BY_NAME[extra], missing))
        batch.touch_all([batch.linked[i] for i in sorted(linked) if i in batch.linked])

    def _carry_building_objects(self, batch: Batch, moved: list[tuple[str, str, str]]) -> None:
        """A moved building's property objects take its project and tenant, one statement for the
        batch; each carried object is published (docs/store.md#moves)."""
        rows = self._rows(
            queries("replica")["carry_building_objects"],
            {
                "building_ids": array_literal([m[0] for m in moved]),
                "project_ids": array_literal([m[1] for m in moved]),
                "tenant_ids": array_literal([m[2] for m in moved]),
            },
        )
        payload = upserted_payload(PROPERTY_OBJECT.name)
        event_type = PROPERTY_OBJECT.upserted_event
        for row in sorted(rows, key=lambda r: (str(r["building_id"]), str(r["number"]), str(r["id"]))):
            batch.events.append(Event(event_type, str(row["id"]), payload(row, batch.ctx.handbook)))

    def delete(self, batch: Batch, talent_ids: list[str]) -> None:
        spec, name = batch.spec, batch.spec.name
        replica = queries("replica")
        query = (
            replica["tombstone_projects"]
            if name == "project"  # a deleted project is archived
            else with_identifiers(replica["tombstone_rows"], table=spec.entity.table)
        )
        rows = self._rows(query, {"ids": talent_ids})
        payload, event_type = upserted_payload(name), spec.entity.upserted_event
        for row in rows:
            batch.events.append(Event(event_type, str(row["id"]), payload(row, batch.ctx.handbook)))
            batch.touch_all(rules.touched_projects(name, row, None))
        batch.result.applied = len(rows)

    def tombstones(
        self, spec: ReplicaEntity, talent_ids: list[str]
    ) -> dict[str, tuple[int | None, int | None]]:
        """Talent id -> (partition, offset) of its delete read from the topic."""
        if not talent_ids:
            return {}
        rows = self._rows(
            queries("replica")["tombstones"],
            {"entity": spec.name, "ids": array_literal(talent_ids)},
        )
        return {r["external_talent_id"]: (r["source_partition"], r["source_offset"]) for r in rows}

    def record_tombstones(self, batch: Batch, sources: dict[str, Source]) -> None:
        """Where each id's tombstone was read (the last one per id)."""
        if not sources:
            return
        ids = sorted(sources)
        with Cursor(self.conn) as cur:
            cur.execute(
                queries("replica")["record_tombstones"],
                {
                    "entity": batch.spec.name,
                    "ids": array_literal(ids),
                    "partitions": array_literal([sources[i].partition for i in ids]),
                    "offsets": array_literal([sources[i].offset for i in ids]),
                },
            )

    def forget_tombstones(self, batch: Batch, talent_ids: list[str]) -> None:
        """Snapshots read after these deletes re-created the entities."""
        if not talent_ids:
            return
        with Cursor(self.conn) as cur:
            cur.execute(
                queries("replica")["forget_tombstones"],
                {"entity": batch.spec.name, "ids": array_literal(sorted(talent_ids))},
            )

    def request_recalcs(self, batch: Batch, projects: dict[str, str]) -> None:
        """Queue rows first, replica rows after: the drain locks a project's queue row and then its
        rows, so writers take them in the same order and neither waits for the other in a cycle."""
        self._enqueue(batch, projects)
        batch.requested.update(projects)

    def write(self, batch: Batch) -> None:
        ctx, result = batch.ctx, batch.result
        # a message the run quarantined already (a batch read again after a crash) still counts as
        # failed, but its row is not written twice nor counted twice (result.quarantined)
        batch.quarantine = insert_failed_items(
            self.conn, ctx.run_id or STREAMING_RUN_ID, batch.stage, batch.quarantine
        )
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

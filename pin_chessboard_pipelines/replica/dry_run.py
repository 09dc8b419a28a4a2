"""A DryRun's view: the replica's rows under what the run has 'applied' so far; records nothing in
the store (docs/talent-initial-import.md#dryrun)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.replica import changes, rules
from pin_chessboard_pipelines.replica.batch import Batch, Item
from pin_chessboard_pipelines.replica.columns import ReplicaEntity
from pin_chessboard_pipelines.replica.context import DryRunState, Seen
from pin_chessboard_pipelines.replica.database import DatabaseView
from pin_chessboard_pipelines.replica.rules import NumberKey
from pin_chessboard_pipelines.talent.snapshots import pin_id_text
from pin_chessboard_pipelines.talent.topic_reader import Source


class DryRunView:
    def __init__(self, conn: Connection, state: DryRunState) -> None:
        self.replica = DatabaseView(conn)
        self.state = state

    def session(self) -> AbstractContextManager[object]:
        return self.state.lock

    def existing_rows(self, spec: ReplicaEntity, talent_ids: list[str]) -> dict[str, dict[str, Any]]:
        # the published columns too: a newer version with equal ones bumps nothing (as the upsert)
        rows = self.replica.existing_rows(spec, talent_ids, _published(spec))
        seen = self.state.seen.get(spec.name, {})
        for talent_id in talent_ids if seen else ():
            mine = seen.get(talent_id)
            if mine is not None:
                rows[talent_id] = _seen_row(spec.name, talent_id, mine)
        return rows

    def parent_rows(self, parent: Entity, column: str, items: Sequence[Item]) -> dict[str, dict[str, Any]]:
        rows = self.replica.parent_rows(parent, column, items)
        seen = self.state.seen.get(parent.name)
        if seen and any(item.values.get(column) is not None for item in items):
            wanted = {
                item.record.parents[parent.name] for item in items if parent.name in item.record.parents
            }
            for talent_id in wanted:
                if talent_id in seen:
                    row = _seen_row(parent.name, talent_id, seen[talent_id])
                    rows[row["id"]] = row
        return rows

    def linked_projects(self, parent: Entity, ids: set[str]) -> dict[str, tuple[str, str]]:
        return self.replica.linked_projects(parent, ids)

    def live_number_holders(self, keys: list[NumberKey]) -> dict[NumberKey, str | None]:
        taken = self.replica.live_number_holders(keys)
        numbers = self.state.numbers
        taken.update({k: numbers[k] for k in keys if k in numbers})
        return taken

    def keep_numbers(self, taken: dict[NumberKey, str | None]) -> None:
        self.state.numbers.update(taken)

    def store(self, batch: Batch, decided: list[Item]) -> None:
        name = batch.spec.name
        columns = _published(batch.spec)
        for item in decided:
            old = item.old
            stored = rules.dry_run_row(name, item.values, old)
            stored["mapped"] = changes.digest(stored, columns)
            batch.applied(item.record, created=old is None, tenant=item.tenant)
            if old is not None and _mapped(old, columns) == stored["mapped"]:
                # mapped fields equal: the real upsert moves replica_version only (no bump, no recalc)
                stored["version"] = old["version"]
                self._remember(name, item.talent_id, stored, old)
                continue
            self._remember(name, item.talent_id, stored, old)
            batch.touch_all(rules.touched_projects(name, stored, old))

    def delete(self, batch: Batch, talent_ids: list[str]) -> None:
        name = batch.spec.name
        existing = self.existing_rows(batch.spec, talent_ids)
        now = datetime.now(UTC)
        for talent_id in talent_ids:
            row = existing.get(talent_id)
            if row is None or row["deleted_at"] is not None:
                continue
            stored = {**row, "deleted_at": now, "version": row["version"] + 1}
            stored["mapped"] = None  # unknown after a delete: the next snapshot counts as a change
            self._remember(name, talent_id, stored, row)
            batch.touch(rules.touched_project(name, stored))
            batch.result.applied += 1

    def tombstones(
        self, spec: ReplicaEntity, talent_ids: list[str]
    ) -> dict[str, tuple[int | None, int | None]]:
        return self.replica.tombstones(spec, talent_ids)

    def record_tombstones(self, batch: Batch, sources: dict[str, Source]) -> None:
        """Nothing is stored."""

    def forget_tombstones(self, batch: Batch, talent_ids: list[str]) -> None:
        """Nothing is stored."""

    def request_recalcs(self, batch: Batch, projects: dict[str, str]) -> None:
        """Nothing is stored."""

    def write(self, batch: Batch) -> None:
        """Nothing is stored: no quarantine rows, events or recalc requests."""

    def _remember(
        self, entity: str, talent_id: str, stored: dict[str, Any], old: dict[str, Any] | None
    ) -> None:
        self.state.seen.setdefault(entity, {})[talent_id] = Seen(
            stored["replica_version"],
            stored["version"],
            stored["deleted_at"],
            stored.get("project_id"),
            stored.get("tenant_id"),
            stored.get("building_id"),
            stored.get("number"),
            stored.get("status"),
            stored.get("status_source"),
            stored.get("mapped"),
        )
        released = rules.released_number(entity, stored, old)
        if released is not None:
            key, own = released
            if self.state.numbers.get(key, own) == own:
                self.state.numbers[key] = None


def _published(spec: ReplicaEntity) -> tuple[str, ...]:
    return changes.published_columns(spec.name, spec.upsert_columns)


def _mapped(row: dict[str, Any], columns: tuple[str, ...]) -> int | None:
    """The digest of a row's published columns: kept for rows this DryRun 'stored', computed for
    rows read from the replica."""
    if "mapped" in row:
        return row["mapped"]
    return changes.digest(row, columns)


def _seen_row(entity: str, talent_id: str, seen: Seen) -> dict[str, Any]:
    return {**seen._asdict(), "id": pin_id_text(entity, talent_id), "external_talent_id": talent_id}

"""What the apply path reads and where it records what it decided: the replica itself
(replica/database.py) or a DryRun's memory over it (replica/dry_run.py)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.replica.batch import Batch, Item
from pin_chessboard_pipelines.replica.columns import ReplicaEntity
from pin_chessboard_pipelines.replica.rules import NumberKey
from pin_chessboard_pipelines.talent.topic_reader import Source


class ReplicaView(Protocol):
    def session(self) -> AbstractContextManager[object]:
        """Around every read and record of one apply call."""
        ...

    def existing_rows(self, spec: ReplicaEntity, talent_ids: list[str]) -> dict[str, dict[str, Any]]:
        """Talent id -> current row."""
        ...

    def parent_rows(self, parent: Entity, column: str, items: Sequence[Item]) -> dict[str, dict[str, Any]]:
        """Parent PIN id -> parent row, for the parents (named by `column`) that exist."""
        ...

    def linked_projects(self, parent: Entity, ids: set[str]) -> dict[str, tuple[str, str]]:
        """Parent PIN id -> (project, tenant) of the linked parents (rules.linked_parent_ids)."""
        ...

    def live_number_holders(self, keys: list[NumberKey]) -> dict[NumberKey, str | None]:
        """(building PIN id, number) -> Talent id of the live object holding it."""
        ...

    def keep_numbers(self, taken: dict[NumberKey, str | None]) -> None:
        """The holders after a round's decisions."""
        ...

    def store(self, batch: Batch, decided: list[Item]) -> None:
        """Upserts the decided items: counts, events and touched projects into `batch`."""
        ...

    def delete(self, batch: Batch, talent_ids: list[str]) -> None:
        """Soft-deletes the alive rows of the ids (tombstones)."""
        ...

    def tombstones(
        self, spec: ReplicaEntity, talent_ids: list[str]
    ) -> dict[str, tuple[int | None, int | None]]:
        """Talent id -> (partition, offset) of its delete read from the topic (rules.superseded_by_delete)."""
        ...

    def record_tombstones(self, batch: Batch, sources: dict[str, Source]) -> None:
        """Where the tombstones of the ids were read."""
        ...

    def forget_tombstones(self, batch: Batch, talent_ids: list[str]) -> None:
        """The entities were re-created by snapshots read after their deletes."""
        ...

    def request_recalcs(self, batch: Batch, projects: dict[str, str]) -> None:
        """Recalc requests of the projects a batch is about to change, before any change."""
        ...

    def write(self, batch: Batch) -> None:
        """The batch's quarantine rows, outbox events and recalc requests."""
        ...

"""Applying Talent snapshots to the replica: ONE path for ApiPull, TopicReplay and the streaming sync.

`apply_snapshots` runs inside the caller's transaction (one page = one transaction in the import,
one poll batch in the streaming sync) and writes, set-based: replica upserts with the version guard,
quarantine rows, outbox events and one debounced recalc request per touched project.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.events.payloads import Handbook


@dataclass
class DryRunState:
    """What a DryRun has 'applied' so far, so later stages see parents and duplicate numbers as a
    real run would (operations.md, "Import result"). Shared by the workers of one run."""

    seen: dict[str, dict[UUID, Any]] = field(default_factory=dict)  # entity -> talent id -> facts


@dataclass
class ApplyContext:
    correlation_id: str
    handbook: Handbook
    debounce_seconds: float
    cap_seconds: float
    run_id: UUID | None = None  # import run (quarantine rows carry it); None in the streaming sync
    stage: str = ""  # Developers .. PropertyObjects
    dry_run: bool = False
    dry_run_state: DryRunState | None = None


@dataclass
class ApplyResult:
    planned: int = 0  # items read from the source
    applied: int = 0  # created or changed
    skipped: int = 0  # no-op by the version guard
    failed: int = 0  # quarantined
    touched_projects: set[tuple[UUID, UUID]] = field(default_factory=set)  # (project PIN id, tenant id)
    events: int = 0  # outbox rows written
    unknown_enums: list[tuple[str, str]] = field(default_factory=list)  # (enum, value)
    quarantined: list[tuple[str | None, str]] = field(default_factory=list)  # (external id, error code)


def apply_snapshots(conn: Connection, entity: str, items: Sequence[dict[str, Any]], ctx: ApplyContext) -> ApplyResult:
    """Applies one batch of snapshots of one entity (developer, project, building, layoutGroup,
    layout, propertyObject) in the caller's transaction."""
    raise NotImplementedError


def apply_tombstones(conn: Connection, entity: str, talent_ids: Sequence[UUID], ctx: ApplyContext) -> ApplyResult:
    """A null Kafka value (tombstone): the entity was deleted in Talent -> soft delete + upserted event."""
    raise NotImplementedError

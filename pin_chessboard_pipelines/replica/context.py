"""What an apply call is given and what it returns, and the DryRun's memory shared by a run."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple
from uuid import UUID

from pin_chessboard_pipelines.events.payloads import Handbook

STREAMING_RUN_ID = UUID(int=0)  # run_id of quarantine rows written by the streaming sync


class Seen(NamedTuple):
    """What later lookups need of a row a DryRun 'stored' (a tuple: a DryRun of a million objects
    keeps a million of these)."""

    replica_version: int
    version: int
    deleted_at: datetime | None
    project_id: str | None
    tenant_id: str | None
    building_id: str | None
    number: str | None
    status: str | None
    status_source: str | None
    mapped: int | None = None  # replica/changes.py digest of the published columns


@dataclass
class DryRunState:
    """What a DryRun has 'applied' so far, so later stages see parents and duplicate numbers as a
    real run would (docs/talent-initial-import.md#dryrun). Shared by the workers of one run: an apply
    holds `lock` from its first read to its last decision."""

    seen: dict[str, dict[str, Seen]] = field(default_factory=dict)  # entity -> Talent id -> row facts
    # (building PIN id, number) -> Talent id of the live object holding it; None = released.
    numbers: dict[tuple[str, str], str | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def to_json(self) -> dict:
        """A JSON value of the state, for the next stage's process (talent_import_dry_run_states)."""
        return {
            "seen": {
                entity: {
                    talent_id: [*row[:2], row.deleted_at.isoformat() if row.deleted_at else None, *row[3:]]
                    for talent_id, row in rows.items()
                }
                for entity, rows in self.seen.items()
            },
            "numbers": [[building, number, holder] for (building, number), holder in self.numbers.items()],
        }

    @staticmethod
    def from_json(value: dict) -> DryRunState:
        state = DryRunState()
        for entity, rows in value.get("seen", {}).items():
            state.seen[entity] = {
                talent_id: Seen(row[0], row[1], datetime.fromisoformat(row[2]) if row[2] else None, *row[3:])
                for talent_id, row in rows.items()
            }
        state.numbers = {(building, number): holder for building, number, holder in value.get("numbers", [])}
        return state


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
class ItemCounts:
    """What an apply counts of its items; an import's stage sums them (talent_import StageCounters)."""

    planned: int = 0  # items read from the source
    applied: int = 0  # created or changed
    skipped: int = 0  # no-op by the version guard
    failed: int = 0  # quarantined


@dataclass
class ApplyResult(ItemCounts):
    touched_projects: set[tuple[UUID, UUID]] = field(default_factory=set)  # (project PIN id, tenant id)
    events: int = 0  # outbox rows written
    unknown_enums: list[tuple[str, str]] = field(default_factory=list)  # (enum, value)
    quarantined: list[tuple[str | None, str]] = field(default_factory=list)  # (external id, error code)
    created: int = 0  # of `applied`, the new rows
    unresolved_references: list[str] = field(default_factory=list)  # "regionId" / "cityId"
    # tenant (the developer's PIN id; "" = not known, e.g. an item that did not parse) ->
    # [applied, skipped, failed]: the import's per-developer figures (docs/talent-initial-import.md#result)
    by_tenant: dict[str, list[int]] = field(default_factory=dict)

    def listed_under(self, tenant: str | None) -> dict[str, list[int]]:
        """`by_tenant` with the items of no known developer (an orphan: its building is not in the
        replica) counted under `tenant`, the developer the source listing was filtered by; None
        (an unfiltered or project listing) leaves them unattributed ("")."""
        counts = {key: list(value) for key, value in self.by_tenant.items()}
        unknown = counts.pop("", None)
        if unknown is None or tenant is None:
            return self.by_tenant
        own = counts.setdefault(tenant, [0, 0, 0])
        for outcome, n in enumerate(unknown):
            own[outcome] += n
        return counts

    def count(self, tenant: object, outcome: int) -> None:
        """One item of `tenant` (None = unknown) was applied (0), skipped (1) or failed (2)."""
        self.by_tenant.setdefault("" if tenant is None else str(tenant), [0, 0, 0])[outcome] += 1

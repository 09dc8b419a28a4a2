"""The import's values shared by the run manager (runner.py), the stage runner and the page workers:
options, the stage report, the stage failure, and what a stage needs of its import run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.recalc.queue import IMPORT_RUN_ALIVE_SECONDS
from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult, DryRunState
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.request import TalentInitialImportRequest
from pin_chessboard_pipelines.talent_import.result import StageCounters
from pin_chessboard_pipelines.talent_import.sources import ImportSource

ApplyFn = Callable[[Connection, str, Sequence[dict[str, Any]], ApplyContext], ApplyResult]


@dataclass(frozen=True)
class ImportOptions:
    lease_seconds: float = 600  # page lease: 10 min (docs/talent-initial-import.md#pages-and-leases)
    lock_timeout_seconds: float = (
        300  # lock acquire timeout: 5 min (docs/talent-initial-import.md#advisory-lock)
    )
    debounce_seconds: float = 30  # recalc debounce (docs/project-aggregates-recalc.md#queue-and-debounce)
    cap_seconds: float = 300  # recalc starvation cap (same)
    # transient failures of a page (source or database): backoff 1, 2, 4 ... 60 s for this long
    page_retry_seconds: float = 600
    page_attempts: int = 3  # attempts of a page failing for a reason no retry fixes (a bug, say)
    retry_seconds: float = 1.0  # first backoff step: a failed page is re-claimed after its wait
    idle_poll_seconds: float = 0.05  # a worker without a page looks again after this
    cache_pages: int = 0  # pages the walker hands over in memory; 0 = 2 per worker + 2
    # Claims of several processes (docs/talent-initial-import.md#pages-and-leases): a process renews
    # its pages' and its run's heartbeat this often; a page whose heartbeat is older than
    # dead_seconds is claimed again (a dead worker's page within 90 s); a Running run whose heartbeat
    # is older than alive_seconds has no live process.
    heartbeat_seconds: float = 5.0
    dead_seconds: float = 45.0
    alive_seconds: float = IMPORT_RUN_ALIVE_SECONDS

    @staticmethod
    def from_settings(settings: Settings, **overrides: Any) -> ImportOptions:
        values: dict[str, Any] = {
            "lease_seconds": settings.import_lease_seconds,
            "lock_timeout_seconds": settings.import_lock_timeout_seconds,
            **settings.recalc_timing,
            "page_retry_seconds": settings.import_page_retry_seconds,
        }
        values.update(overrides)
        return ImportOptions(**values)


@dataclass
class StageReport:
    stage: str
    counters: StageCounters
    pages: int
    pages_processed: int  # by this process in this call
    duration_seconds: float
    cancelled: bool = False
    page_durations_ms: list[float] = field(default_factory=list)
    ended_elsewhere: str | None = None  # the run's status when another process ended it meanwhile
    failed_pages: int = 0

    @property
    def items_per_second(self) -> float:
        processed = self.counters.applied + self.counters.skipped + self.counters.failed
        return processed / self.duration_seconds if self.duration_seconds > 0 else 0.0


class ImportRun(Protocol):
    """What the stage runner and the page workers use of the import run (runner.ImportSession)."""

    url: sa.URL  # the store, for sessions of their own (the lock, the walks)
    engine: Engine
    request: TalentInitialImportRequest
    source: ImportSource
    options: ImportOptions
    dry_run_state: DryRunState | None
    apply_items: ApplyFn

    @property
    def run_row(self) -> runs.Row: ...

    @property
    def run_id(self) -> UUID: ...

    @property
    def correlation_id(self) -> str: ...

    @property
    def loaded_handbook(self) -> Handbook: ...

    handbooks: HandbookCache

    @property
    def page_size(self) -> int: ...

    @property
    def scope_keys(self) -> list[str]: ...

    def log_fields(self, stage: str | None = None, page_no: int | None = None) -> dict[str, Any]: ...

    def should_stop(self) -> bool: ...

    def request_stop(self) -> None: ...

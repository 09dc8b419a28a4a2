"""TalentInitialImportRequest (docs/talent-initial-import.md#request) and its validation: pure functions.

A request is validated before the import writes anything; an invalid one is refused with
CHESSBOARD_IMPORT_INVALID_REQUEST (exit 2 in the CLI).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from pin_chessboard_pipelines.errors import IMPORT_INVALID_REQUEST, Refused

PAGE_SIZE_MIN = 1
PAGE_SIZE_MAX = 2000
DEFAULT_PAGE_SIZE = 500
PROCESSES_MAX = 16  # docs/talent-initial-import.md#processes
WORKERS_MAX = 32
PROJECT_SCOPE_PREFIX = "project:"


class ImportMode(StrEnum):
    TOPIC_REPLAY = "TopicReplay"
    API_PULL = "ApiPull"


class RunStatus(StrEnum):
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


class PageStatus(StrEnum):
    PENDING = "Pending"
    IN_PROGRESS = "InProgress"
    DONE = "Done"
    FAILED = "Failed"


@dataclass(frozen=True)
class Scope:
    """What one walk of a stage lists: everything, one developer (a Dagster partition) or one project."""

    developer_id: str | None = None
    project_id: str | None = None

    @property
    def key(self) -> str:
        """`talent_import_pages.scope`: "" = everything, a developer id, or "project:<id>"."""
        if self.project_id:
            return PROJECT_SCOPE_PREFIX + self.project_id
        return self.developer_id or ""

    @staticmethod
    def from_key(key: str) -> Scope:
        if key.startswith(PROJECT_SCOPE_PREFIX):
            return Scope(project_id=key[len(PROJECT_SCOPE_PREFIX) :])
        return Scope(developer_id=key or None)


ALL = Scope()


@dataclass(frozen=True)
class TalentInitialImportRequest:
    """Mode, DeveloperIdFilter, ProjectIdFilter, PageSize, DryRun and CorrelationId of the request.

    `developer_ids` widens DeveloperIdFilter to several developers (a Dagster partition range);
    `workers` is the number of page workers (threads) of each process; `processes` the number of
    processes (Dagster steps, pods on Kubernetes) that work on each stage at once.
    """

    mode: ImportMode = ImportMode.API_PULL
    developer_ids: tuple[str, ...] = ()
    project_id: str | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    dry_run: bool = False
    correlation_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    workers: int = 2
    processes: int = 1

    @property
    def developer_id_filter(self) -> str | None:
        return self.developer_ids[0] if len(self.developer_ids) == 1 else None

    @property
    def scopes(self) -> tuple[Scope, ...]:
        if self.project_id:
            return (Scope(project_id=self.project_id),)
        if self.developer_ids:
            return tuple(Scope(developer_id=d) for d in self.developer_ids)
        return (ALL,)

    @property
    def scope_keys(self) -> list[str]:
        return [s.key for s in self.scopes]


def _refuse(message: str) -> Refused:
    return Refused(message, IMPORT_INVALID_REQUEST)


def _talent_id(name: str, value: str) -> str:
    try:
        return str(uuid.UUID(str(value).strip()))
    except ValueError:
        raise _refuse(f"{name} {value!r} is not a Talent id (UUID)") from None


def build_request(
    *,
    mode: str | ImportMode = ImportMode.API_PULL,
    developer_ids: Sequence[str] = (),
    project_id: str | None = None,
    page_size: int | None = None,
    dry_run: bool = False,
    correlation_id: str | None = None,
    workers: int = 2,
    processes: int = 1,
) -> TalentInitialImportRequest:
    """A validated request (docs/talent-initial-import.md#request); raises Refused(CHESSBOARD_IMPORT_INVALID_REQUEST)."""
    try:
        parsed_mode = ImportMode(mode)
    except ValueError:
        raise _refuse(f"Mode {mode!r} is not one of {', '.join(m.value for m in ImportMode)}") from None
    if developer_ids and project_id:
        raise _refuse("DeveloperIdFilter and ProjectIdFilter are mutually exclusive: give one of them")
    size = DEFAULT_PAGE_SIZE if page_size is None else page_size
    if isinstance(size, bool) or not isinstance(size, int) or not PAGE_SIZE_MIN <= size <= PAGE_SIZE_MAX:
        raise _refuse(f"PageSize {page_size!r} is out of range {PAGE_SIZE_MIN}..{PAGE_SIZE_MAX}")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= WORKERS_MAX:
        raise _refuse(f"workers {workers!r} is out of range 1..{WORKERS_MAX}")
    if isinstance(processes, bool) or not isinstance(processes, int) or not 1 <= processes <= PROCESSES_MAX:
        raise _refuse(f"processes {processes!r} is out of range 1..{PROCESSES_MAX}")
    if dry_run and processes > 1:
        # a DryRun's view of what it 'applied' lives in one process per stage
        raise _refuse("a DryRun runs on one process: processes must be 1")
    developers = tuple(dict.fromkeys(_talent_id("DeveloperIdFilter", d) for d in developer_ids))
    project = _talent_id("ProjectIdFilter", project_id) if project_id else None
    if correlation_id is not None and not 1 <= len(correlation_id) <= 64:
        raise _refuse("CorrelationId must be 1..64 characters")
    return TalentInitialImportRequest(
        mode=parsed_mode,
        developer_ids=developers,
        project_id=project,
        page_size=size,
        dry_run=bool(dry_run),
        correlation_id=correlation_id or str(uuid.uuid4()),
        workers=workers,
        processes=processes,
    )

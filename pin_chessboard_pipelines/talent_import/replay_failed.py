"""Replaying quarantined items once the source is fixed (docs/talent-initial-import.md#runbook).

`import replay-failed [--run-id ID]` re-reads the items of `talent_import_failed_items` by id from
Talent (property objects through `property-objects/by-ids`, the other entities through their
listing filtered by the developer or project the quarantined payload names), applies them through
the same path as the import (apply_snapshots), stage by stage in parent -> child order, and
removes the quarantine rows of the items it re-read: an item that applied leaves the quarantine,
an item that fails again is quarantined again (a fresh row with the new error). Items Talent no
longer has stay quarantined. Under the import lock, one transaction per page of `page_size` items
(as the import's pages): a page whose transaction fails is rolled back alone, its items stay
quarantined, the pages before and after it keep what they applied, and the replay ends Failed.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import ENTITIES, Entity
from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.replica.apply import (
    STREAMING_RUN_ID,
    ApplyContext,
    ApplyResult,
    apply_snapshots,
)
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache, load_handbook
from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.talent.client import MAX_PAGE_LIMIT, TalentApiClient
from pin_chessboard_pipelines.talent_import.lock import ImportLock
from pin_chessboard_pipelines.talent_import.request import DEFAULT_PAGE_SIZE
from pin_chessboard_pipelines.talent_import.result import StageCounters, item_fields

log = logging.getLogger("pin_chessboard_pipelines.talent_import")

Item = dict[str, Any]


@dataclass
class ReplayResult:
    run_id: str | None  # the import run whose quarantine was replayed; None = every run's
    correlation_id: str
    status: str = "Completed"
    duration_seconds: float = 0.0
    stages: dict[str, StageCounters] = field(
        default_factory=lambda: {e.stage: StageCounters() for e in ENTITIES}
    )
    removed: int = 0  # quarantine rows removed (their items were read again)
    missing: int = 0  # quarantined items Talent no longer has (their rows stay)
    failed_pages: int = 0  # pages whose transaction failed (rolled back, their rows stay)
    error: str | None = None  # the first failed page's error

    def to_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "correlationId": self.correlation_id,
            "mode": "ApiPull",
            "status": self.status,
            "dryRun": False,
            "durationSeconds": round(self.duration_seconds, 3),
            "stages": {stage: counters.to_dict() for stage, counters in self.stages.items()},
            "removedFromQuarantine": self.removed,
            "missingInTalent": self.missing,
            "failedPages": self.failed_pages,
            **({"error": self.error} if self.error else {}),
        }


@dataclass(frozen=True)
class _Quarantined:
    row_id: int
    run_id: UUID
    external_id: str
    payload: Any


def replay_failed(
    engine: Engine,
    client: TalentApiClient,
    *,
    run_id: UUID | None,
    correlation_id: str,
    debounce_seconds: float,
    cap_seconds: float,
    lock_timeout_seconds: float,
    url: str,
    page_size: int = DEFAULT_PAGE_SIZE,
    should_stop: Callable[[], bool] = lambda: False,
) -> ReplayResult:
    """Re-reads, re-applies and un-quarantines; raises Refused when the import lock stays held."""
    started = time.monotonic()
    result = ReplayResult(str(run_id) if run_id else None, correlation_id)
    with ImportLock(url) as lock:
        lock.acquire(lock_timeout_seconds, should_stop=should_stop)
        with engine.connect() as conn:
            handbook = load_handbook(conn)
        handbooks = HandbookCache(handbook)  # each page's transaction reads it again after a rename
        for entity in ENTITIES:
            if should_stop():
                result.status = "Cancelled"
                break
            quarantined = _quarantined(engine, entity, run_id)
            if quarantined:
                ctx = ApplyContext(
                    correlation_id=correlation_id,
                    handbook=handbook,
                    debounce_seconds=debounce_seconds,
                    cap_seconds=cap_seconds,
                    run_id=run_id,
                    stage=entity.stage,
                )
                _replay_entity(engine, client, entity, quarantined, ctx, result, page_size, handbooks)
    if result.failed_pages and result.status == "Completed":
        result.status = "Failed"
    result.duration_seconds = time.monotonic() - started
    return result


def _single_run(rows: list[_Quarantined]) -> UUID | None:
    runs = {q.run_id for q in rows}
    if len(runs) == 1:
        (only,) = runs
        return None if only == STREAMING_RUN_ID else only
    return None


def _quarantined(engine: Engine, entity: Entity, run_id: UUID | None) -> list[_Quarantined]:
    with engine.connect() as conn:
        rows = conn.execute(
            queries("talent_import")["quarantined_items"],
            {"stage": entity.stage, "run_id": None if run_id is None else str(run_id)},
        ).all()
    return [_Quarantined(r.id, r.run_id, r.external_id, r.payload) for r in rows]


def _read_again(client: TalentApiClient, entity: Entity, quarantined: list[_Quarantined]) -> list[Item]:
    """The current snapshots of the quarantined ids: by id for property objects, else from the
    listing filtered by the developer / project the payload names (the whole listing without one)."""
    wanted = {q.external_id.lower() for q in quarantined}
    if entity is entities.PROPERTY_OBJECT:
        return [i for i in client.by_ids(sorted(wanted)) if str(i.get("id")).lower() in wanted]
    scopes: set[tuple[str | None, str | None]] = set()
    for q in quarantined:
        scopes.add(_scope_of(entity, q))
    items: dict[str, Item] = {}
    for developer_id, project_id in sorted(scopes, key=str):
        for item in _listing(client, entity, developer_id, project_id):
            key = str(item.get("id")).lower()
            if key in wanted:
                items[key] = item
    return list(items.values())


def _scope_of(entity: Entity, q: _Quarantined) -> tuple[str | None, str | None]:
    payload = q.payload if isinstance(q.payload, dict) else {}
    if entity is entities.DEVELOPER:
        return q.external_id, None
    if entity is entities.PROJECT:
        developer = payload.get("developerId")
        return (str(developer), None) if isinstance(developer, str) else (None, None)
    project = payload.get("projectId")
    return (None, str(project)) if isinstance(project, str) else (None, None)


def _listing(
    client: TalentApiClient, entity: Entity, developer_id: str | None, project_id: str | None
) -> Iterable[Item]:
    cursor: str | None = None
    while True:
        page = client.list_page(entity.collection, cursor, MAX_PAGE_LIMIT, developer_id, project_id)
        yield from page.items
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _replay_entity(
    engine: Engine,
    client: TalentApiClient,
    entity: Entity,
    quarantined: list[_Quarantined],
    ctx: ApplyContext,
    result: ReplayResult,
    page_size: int,
    handbooks: HandbookCache,
) -> None:
    """One entity's quarantined items read again, then applied and (those Talent still lists)
    removed from the quarantine page by page, one transaction each."""
    items = _read_again(client, entity, quarantined)
    row_ids: dict[str, list[int]] = {}
    for q in quarantined:
        row_ids.setdefault(q.external_id.lower(), []).append(q.row_id)
    reread = [q for q in quarantined if q.external_id.lower() in {str(i.get("id")).lower() for i in items}]
    result.missing += len(quarantined) - len(reread)
    ctx.run_id = ctx.run_id or _single_run(reread)
    counters = StageCounters()
    pages = [items[start : start + page_size] for start in range(0, len(items), page_size)]
    for page_no, page in enumerate(pages):
        ids = [row for item in page for row in row_ids[str(item.get("id")).lower()]]
        try:
            applied = _apply_page(engine, entity, page, ids, ctx, handbooks)
        except Exception as error:  # noqa: BLE001 - this page rolled back alone: its rows stay quarantined
            result.failed_pages += 1
            result.error = result.error or f"{entity.stage} page {page_no}: {error_line(error)}"
            counters.planned += len(page)
            log_event(
                log,
                logging.ERROR,
                "quarantine-replay-page-failed",
                Stage=entity.stage,
                PageNo=page_no,
                CorrelationId=ctx.correlation_id,
                Items=len(page),
                Error=repr(error_line(error)),
            )
            continue
        result.removed += len(ids)
        counters.planned += applied.planned
        counters.applied += applied.applied
        counters.skipped += applied.skipped
        counters.failed += applied.failed
    result.stages[entity.stage] = counters
    log_event(
        log,
        logging.INFO,
        "quarantine-replayed",
        Stage=entity.stage,
        CorrelationId=ctx.correlation_id,
        Quarantined=len(quarantined),
        ReadAgain=len(reread),
        Pages=len(pages),
        **item_fields(counters),
    )


def _apply_page(
    engine: Engine,
    entity: Entity,
    page: list[Item],
    row_ids: list[int],
    ctx: ApplyContext,
    handbooks: HandbookCache,
) -> ApplyResult:
    """One page's items applied and their quarantine rows removed, in one transaction (its events
    named by the handbook as it is now: store/handbook_replica.py)."""
    with engine.begin() as conn:
        page_ctx = dataclasses.replace(ctx, handbook=handbooks.for_publish(conn))
        applied = apply_snapshots(conn, entity.name, page, page_ctx)
        conn.execute(queries("talent_import")["delete_quarantined_items"], {"ids": row_ids})
    return applied

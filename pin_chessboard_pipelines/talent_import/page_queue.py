"""The page queue of an import run: pages recorded by the stage walker (Pending), claimed by the page
workers with `FOR UPDATE SKIP LOCKED` (who holds a page, its lease and heartbeat), completed with
their counters, failed or given back. Functions of a SQLAlchemy connection (the caller owns the
transaction); the SQL is in store/sql/talent_import.sql, beside the run rows' (runs.py).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.entities import DEVELOPER, pin_id
from pin_chessboard_pipelines.replica.apply import ApplyResult
from pin_chessboard_pipelines.talent_import.request import PageStatus, Scope
from pin_chessboard_pipelines.talent_import.runs import Row, statement


@dataclass(frozen=True)
class ClaimedPage:
    id: int
    scope: str
    page_no: int
    cursor: str | None
    attempts: int
    claim_token: uuid.UUID
    staged_items: str | None = None  # the staged items' text of a page another process walked


def last_planned_page(conn: Connection, run_id: uuid.UUID, stage: str, scope: str) -> Row | None:
    return (
        conn.execute(statement("last_planned_page"), {"run_id": run_id, "stage": stage, "scope": scope})
        .mappings()
        .first()
    )


def insert_page(
    conn: Connection,
    run_id: uuid.UUID,
    stage: str,
    scope: str,
    page_no: int,
    cursor: str | None,
    next_cursor: str | None,
    items_planned: int,
    planned_by: str | None = None,
) -> int | None:
    """A Pending page; None when the page was recorded already."""
    return conn.execute(
        statement("insert_page"),
        {
            "run_id": run_id,
            "stage": stage,
            "scope": scope,
            "page_no": page_no,
            "cursor": cursor,
            "next_cursor": next_cursor,
            "is_last": next_cursor is None,
            "items_planned": items_planned,
            "planned_by": planned_by,
        },
    ).scalar()


def claim_page(
    conn: Connection,
    run_id: uuid.UUID,
    stage: str,
    lease_seconds: float,
    *,
    claimed_by: str = "",
    dead_seconds: float = 45.0,
) -> ClaimedPage | None:
    """The next page of the stage for `claimed_by` (<host>:<pid>); a page whose claimant renewed no
    heartbeat for `dead_seconds` (a dead process) is claimed again."""
    token = uuid.uuid4()
    row = (
        conn.execute(
            statement("claim_page"),
            {
                "run_id": run_id,
                "stage": stage,
                "lease_seconds": float(lease_seconds),
                "claim_token": token,
                "claimed_by": claimed_by,
                "dead_seconds": float(dead_seconds),
            },
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    return ClaimedPage(
        row["id"], row["scope"], row["page_no"], row["cursor"], row["attempts"], token, row["staged_items"]
    )


def claimed_pages(conn: Connection, page_ids: list[int]) -> set[int]:
    """Those of `page_ids` that are no longer Pending."""
    return set(conn.execute(statement("claimed_pages"), {"page_ids": page_ids}).scalars())


def hold_claimed_page(conn: Connection, page: ClaimedPage) -> bool:
    held = conn.execute(statement("hold_claimed_page"), {"page_id": page.id, "claim_token": page.claim_token})
    return held.first() is not None


def stage_page(conn: Connection, run_id: uuid.UUID, stage: str, page_id: int, items_text: str) -> None:
    """The items the walker read of a recorded page (staging.staged_text), for any claimant."""
    conn.execute(
        statement("stage_page"), {"run_id": run_id, "stage": stage, "page_id": page_id, "items": items_text}
    )


def staged_page(conn: Connection, run_id: uuid.UUID, stage: str, page_id: int) -> str | None:
    """The staged items' text of a page; None when nothing is staged (a crash emptied the table,
    the run was resumed, the walker could not stage them)."""
    return conn.execute(
        statement("staged_page"), {"run_id": run_id, "stage": stage, "page_id": page_id}
    ).scalar()


def complete_page(
    conn: Connection,
    page: ClaimedPage,
    planned: int,
    result: ApplyResult,
    *,
    run_id: uuid.UUID,
    stage: str,
    read_from: str | None = None,
) -> None:
    """Done with its counters; its staged items are deleted in the same statement."""
    conn.execute(
        statement("complete_page"),
        {
            "run_id": run_id,
            "stage": stage,
            "read_from": None if read_from is None else str(read_from),
            "page_id": page.id,
            "planned": planned,
            "applied": result.applied,
            "skipped": result.skipped,
            "failed": result.failed,
            # an orphan counts in the partition of the developer the listing was filtered by
            "tenant_counters": json.dumps(result.listed_under(_listed_developer(page.scope))),
        },
    )


def _listed_developer(scope_key: str) -> str | None:
    """The developer PIN id a page's listing was filtered by (None: all developers or a project)."""
    developer = Scope.from_key(scope_key).developer_id
    return None if developer is None else str(pin_id(DEVELOPER.name, developer))


def record_page_failure(
    conn: Connection, page: ClaimedPage, error: str, retry_seconds: float, permanent: bool = False
) -> int | None:
    """attempts after this failure; None when the claim was lost meanwhile."""
    return conn.execute(
        statement("record_page_failure"),
        {
            "page_id": page.id,
            "claim_token": page.claim_token,
            "error": error,
            "status": (PageStatus.FAILED if permanent else PageStatus.IN_PROGRESS).value,
            "retry_seconds": float(retry_seconds),
        },
    ).scalar()


def page_cursors(conn: Connection, run_id: uuid.UUID) -> dict[str, list[str]]:
    """Stage -> the cursors of the run's pages (TopicReplay: where each page's partition range is)."""
    cursors: dict[str, list[str]] = {}
    for stage, cursor in conn.execute(statement("page_cursors"), {"run_id": run_id}):
        cursors.setdefault(stage, []).append(cursor)
    return cursors


def release_page(conn: Connection, page: ClaimedPage) -> None:
    conn.execute(statement("release_page"), {"page_id": page.id, "claim_token": page.claim_token})

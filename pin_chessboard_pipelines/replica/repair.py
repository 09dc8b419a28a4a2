"""Runbook "carry left-behind objects" (docs/store.md#moves): property objects whose project is not
their building's, left behind by building moves applied before a moved building carried its
objects. No re-import fixes them (their Talent version is unchanged: the version guard skips them).

One transaction, set-based: both projects of every such object are requested first (the drain's
lock order), then one statement carries the objects, and each is published
(`property-object-upserted` with the new projectId, version + 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.entities import PROPERTY_OBJECT
from pin_chessboard_pipelines.events.outbox import write_outbox_batch
from pin_chessboard_pipelines.events.payloads import property_object_upserted
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc
from pin_chessboard_pipelines.store.cursor import Cursor, begin
from pin_chessboard_pipelines.store.queries import queries


@dataclass(frozen=True)
class Carried:
    objects: int  # objects carried (and published)
    projects: int  # projects requested (old and new ones)


def carry_left_behind_objects(
    conn: Connection, *, correlation_id: str, debounce_seconds: float, cap_seconds: float
) -> Carried:
    begin(conn)
    sql = queries("replica")
    with Cursor(conn) as cur:
        cur.execute(sql["left_behind_projects"], {})
        pairs = cur.fetch_rows()
    projects = {UUID(str(r["old_project_id"])): UUID(str(r["old_tenant_id"])) for r in pairs}
    projects.update({UUID(str(r["project_id"])): UUID(str(r["tenant_id"])) for r in pairs})
    if not projects:
        return Carried(0, 0)
    enqueue_recalc(
        conn,
        projects.items(),
        RecalcReason.CRUD,
        debounce_seconds=debounce_seconds,
        cap_seconds=cap_seconds,
    )
    with Cursor(conn) as cur:
        cur.execute(sql["carry_left_behind_objects"], {})
        rows = cur.fetch_rows()
    events = [
        (PROPERTY_OBJECT.upserted_event, str(row["id"]), property_object_upserted(row))
        for row in sorted(rows, key=lambda r: str(r["id"]))
    ]
    write_outbox_batch(conn, events, correlation_id)
    return Carried(len(rows), len(projects))

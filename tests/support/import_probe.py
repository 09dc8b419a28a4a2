"""A stand-in for replica/apply.py in the import's orchestration tests: it writes to probe tables in
the page transaction (so rollbacks and double applications are real) and keeps the version guard.
Also the options, dataset and helpers those tests share (`probe_import`, `scalar`, `page_statuses`).

Run as a module (`python -m tests.support.import_probe DB_URL SIM_URL ENTITY PAGE PAGE_SIZE`): an
import whose process dies inside a page transaction."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.result import TalentInitialImportResult
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource

FAST = ImportOptions(lock_timeout_seconds=0.3, retry_seconds=0.05, idle_poll_seconds=0.02)
CLIENT = {"backoff_base": 0.01, "backoff_max": 0.05, "max_attempts": 3, "timeout": 10}
SPEC = DatasetSpec(developers=2, projects_per_developer=2, layouts_per_project=3, objects_per_project=7)

DDL = (
    "CREATE TABLE IF NOT EXISTS public.import_probe ("
    " entity text NOT NULL, talent_id text NOT NULL, version bigint NOT NULL,"
    " PRIMARY KEY (entity, talent_id))",
    "CREATE TABLE IF NOT EXISTS public.import_probe_log ("
    " id bigserial PRIMARY KEY, entity text NOT NULL, stage text NOT NULL, talent_id text NOT NULL,"
    " run_id uuid, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())",
)


def create_probe_tables(engine: Engine) -> None:
    with engine.begin() as conn:
        for statement in DDL:
            conn.execute(sa.text(statement))


class ProbeApply:
    """apply_snapshots' signature; `poison(item)` -> an error code quarantines the item (counted failed)."""

    def __init__(
        self,
        poison: Callable[[dict[str, Any]], str | None] | None = None,
        before_apply: Callable[[str, Sequence[dict[str, Any]]], None] | None = None,
    ) -> None:
        self.poison = poison
        self.before_apply = before_apply
        self.calls = 0
        self.dry_runs = 0
        self._lock = threading.Lock()

    def __call__(
        self, conn: Connection, entity: str, items: Sequence[dict[str, Any]], ctx: ApplyContext
    ) -> ApplyResult:
        with self._lock:
            self.calls += 1
            self.dry_runs += int(ctx.dry_run)
        if self.before_apply is not None:
            self.before_apply(entity, items)
        result = ApplyResult(planned=len(items))
        good = []
        for item in items:
            code = self.poison(item) if self.poison else None
            if code:
                result.failed += 1
                result.quarantined.append((item.get("id"), code))
            else:
                good.append(item)
        if not good:
            return result
        ids = [str(i["id"]) for i in good]
        versions = [int(i["version"]) for i in good]
        if ctx.dry_run:
            known = dict(
                conn.execute(
                    sa.text(
                        "SELECT talent_id, version FROM public.import_probe WHERE entity = :e AND talent_id = ANY(:ids)"
                    ),
                    {"e": entity, "ids": ids},
                ).all()
            )
            result.applied = sum(1 for i, v in zip(ids, versions, strict=True) if known.get(i, 0) < v)
            result.skipped = len(good) - result.applied
            return result
        changed = (
            conn.execute(
                sa.text(
                    "INSERT INTO public.import_probe (entity, talent_id, version)"
                    " SELECT :e, t.id, t.v FROM unnest(CAST(:ids AS text[]), CAST(:versions AS bigint[])) AS t(id, v)"
                    " ON CONFLICT (entity, talent_id) DO UPDATE SET version = EXCLUDED.version"
                    " WHERE import_probe.version < EXCLUDED.version RETURNING talent_id"
                ),
                {"e": entity, "ids": ids, "versions": versions},
            )
            .scalars()
            .all()
        )
        result.applied = len(changed)
        result.skipped = len(good) - result.applied
        conn.execute(
            sa.text(
                "INSERT INTO public.import_probe_log (entity, stage, talent_id, run_id)"
                " SELECT :e, :stage, t.id, :run_id FROM unnest(CAST(:ids AS text[])) AS t(id)"
            ),
            {"e": entity, "stage": ctx.stage, "ids": ids, "run_id": ctx.run_id},
        )
        result.events = result.applied
        return result


def probe_import(
    db_url: str, sim, apply, *, options: ImportOptions = FAST, should_stop=None, **request
) -> TalentInitialImportResult:
    """An ApiPull import of the simulator `sim` through `apply`, with the tests' fast options."""
    request.setdefault("page_size", 4)
    return ImportSession(
        db_url,
        build_request(**request),
        ApiPullSource(sim.url, should_stop=should_stop, client_options=CLIENT),
        options=options,
        apply=apply,
        should_stop=should_stop,
    ).run_here()


def scalar(engine: Engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).scalar()


def page_statuses(engine: Engine, run_id) -> dict[str, list[str]]:
    """Status of every page of an import run, per stage, in page order."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT stage, status FROM chessboard.talent_import_pages WHERE run_id = :r ORDER BY stage, page_no"
            ),
            {"r": run_id},
        ).all()
    pages: dict[str, list[str]] = {}
    for stage, status in rows:
        pages.setdefault(stage, []).append(status)
    return pages


def _killed_import(db_url: str, sim_url: str, kill_entity: str, kill_at_page: int, page_size: int) -> None:
    """An import whose process dies (no cleanup at all) inside the transaction of the
    `kill_at_page`-th page of `kill_entity`: one page worker, so the pages before it are Done."""
    seen = {"pages": 0}

    def die(entity: str, items: Sequence[dict[str, Any]]) -> None:
        if entity == kill_entity:
            seen["pages"] += 1
            if seen["pages"] == kill_at_page:
                os._exit(137)

    apply = ProbeApply(before_apply=die)
    # the doomed page writes first, so the kill interrupts a page transaction that has written rows
    original = apply.__call__

    def write_then_die(conn: Connection, entity: str, items: Sequence[dict[str, Any]], ctx: ApplyContext):
        apply.before_apply = None
        result = original(conn, entity, items, ctx)
        die(entity, items)
        return result

    ImportSession(
        db_url,
        build_request(page_size=page_size, workers=1),
        ApiPullSource(sim_url),
        options=ImportOptions(idle_poll_seconds=0.02),
        apply=write_then_die,
    ).run_here()
    raise SystemExit("the import finished before the kill")


if __name__ == "__main__":
    _killed_import(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))

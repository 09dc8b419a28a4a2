"""One stage of the import in this process (docs/talent-initial-import.md#stages-and-barriers): a
walker records the pages of the source listing (Pending) while the page workers claim and apply
them; the stage ends at its barrier, when every walk ended and every page is Done.

A page is read from the source once: the walker stages the items it read in the store with the
page row (talent_import_staged_pages) and hands them to the workers of this process through the
page cache; a claimant in another process applies the staged items. Only a page with nothing
staged (a crash emptied the unlogged table, a resumed run) is read again by its cursor.
"""

from __future__ import annotations

import logging
import threading
import time

from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.errors import (
    RetryStopped,
    StageFailed,
    TalentCancelled,
    TalentPermanentError,
    error_line,
)
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.observability.metrics import IMPORT_PAGES
from pin_chessboard_pipelines.retry import PERMANENT, FailureStreak, Retrier
from pin_chessboard_pipelines.store.lock import AdvisoryLock, open_session
from pin_chessboard_pipelines.talent_import import page_queue, runs
from pin_chessboard_pipelines.talent_import.model import ImportRun, StageReport
from pin_chessboard_pipelines.talent_import.page_worker import Heartbeat, PageWorker, StageThread, StageWork
from pin_chessboard_pipelines.talent_import.request import Scope
from pin_chessboard_pipelines.talent_import.result import StageCounters, item_fields
from pin_chessboard_pipelines.talent_import.staging import staged_text

log = logging.getLogger("pin_chessboard_pipelines.talent_import")


WALK_APPLICATION_NAME = "pin-chessboard-import-walk"  # pg_stat_activity: the process walking a stage
WALK_LOCK_POLL_SECONDS = 1.0  # a process that does not walk looks again whether the walker is gone


def stage_walked(session: ImportRun, stage: Entity) -> bool:
    with session.engine.connect() as conn:
        return runs.stage_state(conn, session.run_id, stage.stage).walked_scopes >= set(session.scope_keys)


def stage_complete(session: ImportRun, stage: Entity) -> bool:
    with session.engine.connect() as conn:
        return runs.stage_state(conn, session.run_id, stage.stage).complete(session.scope_keys)


def run_stage(session: ImportRun, stage: Entity) -> StageReport:
    """Plans and processes one stage in this process until its barrier, then reports it."""
    started = time.monotonic()
    worked = work_stage(session, stage)
    return stage_report(session, stage, worked, time.monotonic() - started)


def work_stage(session: ImportRun, stage: Entity) -> StageReport:
    """This process's share of one stage: the walk (while the stage is not planned yet, by the
    process that holds the stage's walk lock) and `workers` page workers, until the barrier
    (every walk ended, every page Done), a failure or a stop. Other processes may work on the same stage at the same time; nothing here is shared with
    them but the pages."""
    started = time.monotonic()
    work = StageWork(session, stage)
    threads = [
        # tracing.bind: the threads' page spans are children of this stage's span
        threading.Thread(
            target=tracing.bind(PageWorker(work).run), name=f"import-{stage.stage}-{i}", daemon=True
        )
        for i in range(session.request.workers)
    ]
    if not work.retrying("read the stage state", lambda: stage_complete(session, stage)):
        threads.insert(
            0,
            threading.Thread(
                target=tracing.bind(StageWalker(work).run), name=f"import-{stage.stage}-walk", daemon=True
            ),
        )
    else:
        work.walk_done.set()  # the barrier says when the walk ended
    with Heartbeat.of(work):
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # short joins: an interrupt reaches this (main) thread promptly
        except BaseException:
            session.request_stop()
            for thread in threads:
                thread.join()  # the current pages finish or roll back
            raise
    if work.error is not None:
        raise work.error
    return StageReport(
        stage=stage.stage,
        counters=StageCounters(),
        pages=0,
        pages_processed=work.pages_processed,
        duration_seconds=time.monotonic() - started,
        cancelled=work.stopping(),
        page_durations_ms=work.page_durations_ms,
        ended_elsewhere=work.ended_elsewhere,
    )


def stage_report(
    session: ImportRun,
    stage: Entity,
    worked: StageReport | None = None,
    duration_seconds: float | None = None,
) -> StageReport:
    """The stage at its barrier as the pages say (every process's work), logged once. Its duration:
    the caller's when it timed the stage itself, else the pages' span (a Dagster barrier step,
    whose page steps ran in other processes)."""

    def read() -> tuple[StageCounters, runs.StageState]:
        with session.engine.begin() as conn:
            return (
                runs.sum_stage_counters(conn, session.run_id).get(stage.stage, StageCounters()),
                runs.stage_state(conn, session.run_id, stage.stage),
            )

    retrying = Retrier(session.options.page_retry_seconds, fields=lambda: session.log_fields(stage.stage))
    counters, state = retrying("read the stage counters", read)
    complete = state.complete(session.scope_keys)
    report = StageReport(
        stage=stage.stage,
        counters=counters,
        pages=state.pages,
        pages_processed=worked.pages_processed if worked else 0,
        duration_seconds=state.span_seconds if duration_seconds is None else duration_seconds,
        cancelled=not complete,
        page_durations_ms=worked.page_durations_ms if worked else [],
        failed_pages=state.failed,
    )
    if complete:
        log_event(
            log,
            logging.INFO,
            "stage-completed",
            **session.log_fields(stage.stage),
            Pages=report.pages,
            Planned=counters.planned,
            **item_fields(counters),
            DurationSeconds=f"{report.duration_seconds:.2f}",
            ItemsPerSecond=f"{report.items_per_second:.0f}",
        )
    else:
        log_event(
            log,
            logging.WARNING,
            "stage-cancelled",
            **session.log_fields(stage.stage),
            Pages=state.pages,
            Done=state.done,
        )
    return report


class StageWalker(StageThread):
    """Records the pages of every scope's listing (Pending), going on from the last recorded one."""

    def __init__(self, work: StageWork) -> None:
        super().__init__(work)
        self._page_no = 0  # the page the walk records next

    def run(self) -> None:
        """Walks while it holds the stage's walk lock: one walker per stage in the whole cluster; when
        the walking process dies its session frees the lock and a walker of another process goes on
        from the last recorded page."""
        work, session, stage = self.work, self.session, self.stage
        lock = AdvisoryLock(f"Pin:lock:talent-import-walk:{session.run_id}:{stage.stage}")
        conn = None
        try:
            conn = open_session(session.url, WALK_APPLICATION_NAME)
            while not lock.acquire(conn, 0):
                if work.stopping() or stage_walked(session, stage):
                    return  # another process walks the stage, or walked it
                work.sleep(WALK_LOCK_POLL_SECONDS)
            self._walk()
        except BaseException as e:  # noqa: BLE001 - a worker thread hands whatever ends it to the main thread
            work.fail(e)
        finally:
            if conn is not None:
                conn.close()  # ends the session: the walk lock with it
            work.walk_done.set()
            work.notify()

    def _walk(self) -> None:
        session, stage = self.session, self.stage
        for scope_key in session.scope_keys:
            if not self._walk_scope(scope_key):
                return
        with session.engine.connect() as conn:
            planned = runs.stage_state(conn, session.run_id, stage.stage)
        log_event(log, logging.INFO, "stage-planned", **session.log_fields(stage.stage), Pages=planned.pages)

    def _walk_scope(self, scope_key: str) -> bool:
        """False when the walk stopped early (cancelled or failed)."""
        work, stage = self.work, self.stage
        failures = FailureStreak(work.policy)
        while not work.stopping():
            try:
                last = work.retrying("read the walk", lambda: self._last_planned(scope_key))
            except RetryStopped:
                return False
            if last is not None and last["is_last"]:
                return True
            self._page_no = 0 if last is None else last["page_no"] + 1
            try:
                return self._walk_from(scope_key, None if last is None else last["next_cursor"], failures)
            except (TalentCancelled, RetryStopped):
                return False
            except TalentPermanentError as e:
                raise StageFailed(f"stage {stage.stage}: planning failed: {e}") from None
            except Exception as e:  # noqa: BLE001 - the failure policy decides, whatever its type
                self._walk_failed(scope_key, failures, e)
        return False

    def _walk_from(self, scope_key: str, start: str | None, failures: FailureStreak) -> bool:
        """Records the listing's pages from `start` on; False when stopped on the way."""
        session, stage, work = self.session, self.stage, self.work
        walked = 0
        for planned in session.source.plan_pages(
            stage, Scope.from_key(scope_key), page_size=session.page_size, start=start
        ):
            self._record(scope_key, planned.cursor, planned.next_cursor, planned.items)
            self._page_no += 1
            walked += 1
            failures.reset()
            if work.stopping():
                return False
        if walked == 0:  # a source that yields nothing still ends its walk with an empty page
            self._record(scope_key, start, None, [])
        return True

    def _record(
        self, scope_key: str, cursor: str | None, next_cursor: str | None, items: list | None
    ) -> None:
        """A planned page (Pending) and, in the same transaction, the items the walk read staged for
        a claimant in any process; they also go to this process's workers in memory."""
        session, stage, work = self.session, self.stage, self.work
        staged = staged_text(items) if items is not None else None
        with session.engine.begin() as conn:
            page_id = page_queue.insert_page(
                conn,
                session.run_id,
                stage.stage,
                scope_key,
                self._page_no,
                cursor,
                next_cursor,
                len(items) if items is not None else 0,
                planned_by=work.claimed_by,
            )
            if page_id is not None and staged is not None:
                page_queue.stage_page(conn, session.run_id, stage.stage, page_id, staged)
        if page_id is not None:
            IMPORT_PAGES.labels(stage.stage, "Planned").inc()
            if items is not None:
                work.cache.put(page_id, items, work.stopping, self._claimed_elsewhere)
            work.notify()

    def _walk_failed(self, scope_key: str, failures: FailureStreak, error: Exception) -> None:
        """A failed listing read: waits as the policy says, or fails the stage when it gives up."""
        stage = self.stage
        decision = failures.decide(error)  # the page workers' policy
        wait, reason = decision.wait, decision.reason  # wait None: the listing read failed for good
        self.page_failed(
            self._page_no, scope_key, wait, reason, error, Planning=True, Attempt=failures.attempt
        )
        if wait is None:
            spent = f" over {failures.elapsed:.0f}s" if reason != PERMANENT else ""
            raise StageFailed(
                f"stage {stage.stage}: planning page {self._page_no} failed {failures.attempt} time(s)"
                f"{spent}: {error_line(error)}"
            ) from None
        self.work.sleep(wait)

    def _last_planned(self, scope_key: str) -> runs.Row | None:
        with self.session.engine.connect() as conn:
            return page_queue.last_planned_page(conn, self.session.run_id, self.stage.stage, scope_key)

    def _claimed_elsewhere(self, page_ids: list[int]) -> set[int]:
        """Cached pages that are no longer Pending: another process claimed them (ours take the
        items out of the cache when they claim)."""
        with self.session.engine.connect() as conn:
            return page_queue.claimed_pages(conn, page_ids)

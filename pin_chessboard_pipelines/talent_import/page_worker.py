"""The page workers of one stage (docs/talent-initial-import.md#pages-and-leases): claim a page
(FOR UPDATE SKIP LOCKED, under a lease), read it outside the transaction (from the walker's cache
in this process, else the items the walker staged in the store, else by cursor from the source),
then apply it and mark it Done, its staged items deleted, in ONE transaction.

`StageWork` is what the walker and the workers of one stage in this process share: the stop flag,
the first error, the page cache, the apply context and the figures of the stage report.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

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
from pin_chessboard_pipelines.observability.metrics import (
    IMPORT_ITEMS,
    IMPORT_JOB,
    IMPORT_PAGE_DURATION,
    IMPORT_PAGE_RETRIES,
    IMPORT_PAGES,
    count_applied,
)
from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult
from pin_chessboard_pipelines.retry import PERMANENT, FailurePolicy, Retrier
from pin_chessboard_pipelines.stopper import Stopper
from pin_chessboard_pipelines.talent_import import page_queue, runs
from pin_chessboard_pipelines.talent_import.beating import Beating
from pin_chessboard_pipelines.talent_import.model import ImportRun
from pin_chessboard_pipelines.talent_import.page_cache import PageCache
from pin_chessboard_pipelines.talent_import.request import Scope
from pin_chessboard_pipelines.talent_import.result import item_fields
from pin_chessboard_pipelines.talent_import.staging import ReadFrom, staged_items

log = logging.getLogger("pin_chessboard_pipelines.talent_import")


class StageWork:
    """The walker and the workers of one stage in this process, and what they share."""

    def __init__(self, session: ImportRun, stage: Entity) -> None:
        self.session = session
        self.stage = stage
        self.options = session.options
        self.cache = PageCache(self.options.cache_pages or 2 * session.request.workers + 2)
        self.walk_done = threading.Event()
        self.wakeup = threading.Condition()
        self.error: BaseException | None = None
        self.ended_elsewhere: str | None = None  # the run's status when another process ended it
        self.pages_processed = 0
        self.page_durations_ms: list[float] = []
        self._lock = threading.Lock()
        # pages and walks: transient failures back off within the page-retry budget from the first
        # failed attempt, a 4xx other than 429 gives up at once, anything else gets page_attempts
        self.policy = FailurePolicy(
            budget_seconds=self.options.page_retry_seconds,
            initial=self.options.retry_seconds,
            attempts=self.options.page_attempts,
            permanent=(TalentPermanentError,),
        )
        self.stopper = Stopper(self.stopping)
        self.first_failure: dict[int, float] = {}  # page id -> monotonic time of its first failure
        self.claimed_by = process_name()
        self._held: set[int] = set()  # the pages this process works on: their heartbeats are renewed
        self._names: dict[str, str] = {}  # developer scope -> the developer's name (page lines)
        self.retrying = Retrier(
            self.options.page_retry_seconds,
            should_stop=self.stopping,
            fields=lambda: session.log_fields(stage.stage),
        )
        self.context = ApplyContext(
            correlation_id=session.correlation_id,
            handbook=session.loaded_handbook,
            debounce_seconds=self.options.debounce_seconds,
            cap_seconds=self.options.cap_seconds,
            run_id=session.run_id,
            stage=stage.stage,
            dry_run=bool(session.run_row["dry_run"]),
            dry_run_state=session.dry_run_state,
        )

    def stopping(self) -> bool:
        return self.error is not None or self.session.should_stop()

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = (
                    error
                    if isinstance(error, StageFailed)
                    else StageFailed(f"stage {self.stage.stage} failed: {error_line(error)}")
                )
        self.notify()

    def notify(self) -> None:
        with self.wakeup:
            self.wakeup.notify_all()

    def wait_for_work(self) -> None:
        with self.wakeup:
            self.wakeup.wait(self.options.idle_poll_seconds)

    def sleep(self, seconds: float) -> None:
        self.stopper.sleep(seconds)

    def hold(self, page_id: int) -> None:
        with self._lock:
            self._held.add(page_id)

    def let_go(self, page_id: int) -> None:
        with self._lock:
            self._held.discard(page_id)

    def held(self) -> list[int]:
        with self._lock:
            return sorted(self._held)

    def developer_fields(self, scope: str) -> dict[str, str]:
        """`Developer=<name>` of a page line when the page belongs to one developer (a developer
        scope) and the replica knows its name (after the Developers stage; read once per scope)."""
        developer = Scope.from_key(scope).developer_id
        if developer is None:
            return {}
        name = self._names.get(developer)
        if name is None:
            try:
                with self.session.engine.connect() as conn:
                    name = runs.developer_names(conn, [developer]).get(developer)
            except Exception:  # noqa: BLE001 - a log line's name never fails a page
                return {}
            if name is None:
                return {}
            self._names[developer] = name
        return {"Developer": repr(name)}

    def processed(self, elapsed_ms: float) -> None:
        with self._lock:
            self.pages_processed += 1
            self.page_durations_ms.append(elapsed_ms)


def process_name() -> str:
    """<host>:<pid>, the claimant of the pages this process claims (talent_import_pages.claimed_by)."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Heartbeat(Beating):
    """Renews, every `heartbeat_seconds`, the heartbeat of the run and of the pages `held()` returns,
    so that their claims stay this process's while it lives; calls `on_ended(status)` once when the
    run ended elsewhere (another process failed it, an operator cancelled it), and stops."""

    def __init__(
        self,
        session: ImportRun,
        *,
        claimed_by: str = "",
        held: Callable[[], list[int]] = list,
        on_ended: Callable[[str | None], None] | None = None,
        name: str = "import-heartbeat",
    ) -> None:
        super().__init__(session.options.heartbeat_seconds, name)
        self.session, self.claimed_by, self.held, self.on_ended = session, claimed_by, held, on_ended

    @staticmethod
    def of(work: StageWork) -> Heartbeat:
        """The heartbeat of a stage's workers in this process: the run stops them when it ended."""

        def ended(status: str | None) -> None:
            work.ended_elsewhere = status
            work.session.request_stop()
            work.notify()

        return Heartbeat(
            work.session,
            claimed_by=work.claimed_by,
            held=work.held,
            on_ended=ended,
            name=f"import-{work.stage.stage}-heartbeat",
        )

    def log_fields(self) -> dict[str, Any]:
        return self.session.log_fields()

    def beat_once(self) -> bool:
        session = self.session
        with session.engine.begin() as conn:
            status = runs.heartbeat(conn, session.run_id, self.claimed_by, self.held())
        if status != "Running" and self.on_ended is not None:
            log_event(log, logging.WARNING, "run-ended-elsewhere", **session.log_fields(), Status=status)
            self.on_ended(status)
            return False
        return True


class StageThread:
    """What one thread of a stage (a page worker, the walker) works with: the stage's shared work,
    its import run, its entity and the import's options."""

    def __init__(self, work: StageWork) -> None:
        self.work = work
        self.session = work.session
        self.stage = work.stage
        self.options = work.options

    def page_failed(
        self, page_no: int, scope: str, wait: float | None, reason: str, error: BaseException, **fields: Any
    ) -> None:
        """Counts and logs a failed read or apply of a page: for good when `wait` is None, else it is
        tried again after `wait` seconds."""
        stage = self.stage.stage
        if wait is None:
            IMPORT_PAGES.labels(stage, "Failed").inc()
        else:
            IMPORT_PAGE_RETRIES.labels(stage).inc()
        log_event(
            log,
            logging.WARNING,
            "page-failed" if wait is None else "page-retry",
            **self.session.log_fields(stage, page_no),
            Scope=scope or "all",
            **fields,
            Reason=reason,
            **({} if wait is None else {"WaitSeconds": f"{wait:.1f}"}),
            Error=repr(error_line(error)),
        )


class PageWorker(StageThread):
    """One worker thread of a stage: claims and processes pages until the stage's barrier."""

    def run(self) -> None:
        work, session = self.work, self.session
        try:
            while not work.stopping():
                page = work.retrying("claim a page", self._claim)
                if page is None:
                    if work.walk_done.is_set() and work.retrying(
                        "read the stage state", self._barrier_reached
                    ):
                        return
                    work.wait_for_work()
                    continue
                with tracing.span(
                    "talent_import.page",
                    {
                        "pin.import.run_id": session.run_id,
                        "pin.import.stage": self.stage.stage,
                        "pin.import.page_no": page.page_no,
                        "pin.import.scope": page.scope or "all",
                    },
                ):
                    try:
                        self._process(page)
                    finally:
                        work.let_go(page.id)
        except RetryStopped:
            return
        except BaseException as e:  # noqa: BLE001 - a worker thread hands whatever ends it to the main thread
            work.fail(e)

    def _claim(self) -> page_queue.ClaimedPage | None:
        options = self.options
        with self.session.engine.begin() as conn:
            page = page_queue.claim_page(
                conn,
                self.session.run_id,
                self.stage.stage,
                options.lease_seconds,
                claimed_by=self.work.claimed_by,
                dead_seconds=options.dead_seconds,
            )
        if page is not None:
            self.work.hold(page.id)
        return page

    def _barrier_reached(self) -> bool:
        with self.session.engine.connect() as conn:
            state = runs.stage_state(conn, self.session.run_id, self.stage.stage)
        if state.failed:
            self.work.fail(StageFailed(f"stage {self.stage.stage}: {state.failed} page(s) Failed"))
        return state.complete(self.session.scope_keys)

    def _process(self, page: page_queue.ClaimedPage) -> None:
        session, stage = self.session, self.stage
        started = time.perf_counter()
        # INFO: with several processes, which one took a page (and took over a dead one's) is the story
        log_event(
            log,
            logging.INFO,
            "page-claimed",
            **session.log_fields(stage.stage, page.page_no),
            Scope=page.scope or "all",
            ClaimedBy=self.work.claimed_by,
            Attempts=page.attempts,
        )
        try:
            items, read_from = self._items(page)
            with session.engine.begin() as conn:
                # first: the names of this page's events are the handbook's now (store/handbook_replica.py)
                context = dataclasses.replace(self.work.context, handbook=session.handbooks.for_publish(conn))
                if not page_queue.hold_claimed_page(conn, page):
                    log_event(
                        log,
                        logging.WARNING,
                        "page-lost",
                        **session.log_fields(stage.stage, page.page_no),
                        Reason="the claim was taken over",
                    )
                    return
                result = session.apply_items(conn, stage.name, items, context)
                page_queue.complete_page(
                    conn,
                    page,
                    len(items),
                    result,
                    run_id=session.run_id,
                    stage=stage.stage,
                    read_from=read_from,
                )
        except TalentCancelled:
            self.work.retrying("release a page", lambda: self._release(page))
            return
        except Exception as e:  # noqa: BLE001 - the failure policy decides, whatever its type
            self._record_failure(page, e)
            return
        self.work.first_failure.pop(page.id, None)
        elapsed_ms = (time.perf_counter() - started) * 1000
        self._account(page, result, len(items), elapsed_ms)

    def _items(self, page: page_queue.ClaimedPage) -> tuple[list, ReadFrom]:
        """The page's items, outside the page transaction: the walker's of this process, else the
        staged ones, else read again from the source by the page's cursor."""
        session = self.session
        items = self.work.cache.take(page.id)
        if items is not None:
            return items, ReadFrom.WALK
        text = page.staged_items  # came with the claim when another process walked the page
        if text is None:  # walked here, but no longer in memory
            with session.engine.connect() as conn:
                text = page_queue.staged_page(conn, session.run_id, self.stage.stage, page.id)
        if text is not None:
            return staged_items(text), ReadFrom.STAGED
        items = session.source.fetch_page(
            self.stage, page.cursor, Scope.from_key(page.scope), page_size=session.page_size
        )
        return items, ReadFrom.SOURCE

    def _release(self, page: page_queue.ClaimedPage) -> None:
        with self.session.engine.begin() as conn:
            page_queue.release_page(conn, page)

    def _record_failure(self, page: page_queue.ClaimedPage, error: Exception) -> None:
        """A failed attempt: transient ones (5xx, 429, timeout, connection loss, deadlock, the
        database restarting) wait with backoff, the page re-claimed after its wait, until the
        page-retry budget is spent; a 4xx other than 429 fails the stage at once; anything else gets
        `page_attempts` attempts."""
        work, session, stage = self.work, self.session, self.stage
        tracing.record_error(error)
        attempt = page.attempts + 1
        now = time.monotonic()
        first = work.first_failure.setdefault(page.id, now)
        decision = work.policy.decide(error, attempt, now - first)
        permanent, reason = decision.give_up, decision.reason
        lease = decision.wait or 0.0

        def record() -> int | None:
            with session.engine.begin() as conn:
                return page_queue.record_page_failure(
                    conn, page, error_line(error), lease, permanent=permanent
                )

        attempts = work.retrying("record a failed page", record)
        # a page counts Failed once, when it fails for good
        self.page_failed(
            page.page_no, page.scope, None if permanent else lease, reason, error, Attempts=attempts
        )
        if permanent:
            work.first_failure.pop(page.id, None)
            spent = f" over {now - first:.0f}s" if reason != PERMANENT else ""
            work.fail(
                StageFailed(
                    f"stage {stage.stage}: page {page.page_no} failed {attempts} time(s){spent}: "
                    f"{error_line(error)}"
                )
            )

    def _account(
        self, page: page_queue.ClaimedPage, result: ApplyResult, planned: int, elapsed_ms: float
    ) -> None:
        session, stage = self.session, self.stage
        aggregate = stage.aggregate_type  # label of chessboard_import_items_total
        tracing.set_attributes(
            {
                "pin.import.items": planned,
                "pin.import.applied": result.applied,
                "pin.import.skipped": result.skipped,
                "pin.import.failed": result.failed,
                "pin.import.events": result.events,
            }
        )
        IMPORT_PAGES.labels(stage.stage, "Done").inc()
        IMPORT_PAGE_DURATION.observe(elapsed_ms)
        for name in ("applied", "skipped", "failed"):
            count = getattr(result, name)
            if count:
                IMPORT_ITEMS.labels(aggregate, name).inc(count)
        if not self.work.context.dry_run:  # the page committed: its quarantine and unknown enums count now
            count_applied(result, IMPORT_JOB)
        log_event(
            log,
            logging.INFO,
            "page-applied",
            **session.log_fields(stage.stage, page.page_no),
            Scope=page.scope or "all",
            **self.work.developer_fields(page.scope),
            Items=planned,
            **item_fields(result),
            Events=result.events,
            Ms=f"{elapsed_ms:.0f}",
        )
        self.work.processed(elapsed_ms)

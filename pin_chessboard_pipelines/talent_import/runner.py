"""The import orchestration of seed 004 ("Алгоритм"): lock, run row, stages behind barriers, the page loop.

One `ImportSession` is one import run held by this process. Per stage a walker records the pages
of the source listing (Pending) while N worker threads claim pages (FOR UPDATE SKIP LOCKED) and
process each in ONE transaction: apply_snapshots + the page's Done mark and counters. The source
is read before the transaction; events go to the outbox in it and to Kafka after commit (relay).
The walker hands the items it read to the workers of this process through a small cache, so a page
is read once; a page processed elsewhere (another process, a re-claim) is fetched again by cursor.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.errors import EXIT_FAILED, IMPORT_DISABLED, ChessboardError, Refused
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.observability.metrics import (
    IMPORT_ITEMS,
    IMPORT_PAGE_DURATION,
    IMPORT_PAGES,
    IMPORT_RUNNING,
    IMPORT_THROUGHPUT,
)
from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult, DryRunState, apply_snapshots
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.talent.client import (
    TalentCancelled,
    TalentPermanentError,
)
from pin_chessboard_pipelines.talent.topics import STAGES, TalentStage
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.lock import AdvisoryLock
from pin_chessboard_pipelines.talent_import.request import RunStatus, Scope, TalentInitialImportRequest
from pin_chessboard_pipelines.talent_import.result import StageCounters, TalentInitialImportResult
from pin_chessboard_pipelines.talent_import.sources import ImportSource

log = logging.getLogger("pin_chessboard_pipelines.talent_import")

ApplyFn = Callable[[Connection, str, Sequence[dict[str, Any]], ApplyContext], ApplyResult]


class StageFailed(ChessboardError):
    """A stage gave up after bounded retries: the run is Failed and can be resumed."""

    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class ImportOptions:
    lease_seconds: float = 600  # page lease (seed 004: 10 min)
    lock_timeout_seconds: float = 300  # advisory-lock acquire timeout (seed 004: 5 min)
    debounce_seconds: float = 30  # recalc debounce (seed 000)
    cap_seconds: float = 300  # recalc starvation cap (seed 000)
    page_attempts: int = 3  # failed attempts of one page before the stage fails
    retry_seconds: float = 1.0  # lease of a failed attempt: the page is re-claimed after it
    idle_poll_seconds: float = 0.05  # a worker without a page looks again after this
    cache_pages: int = 0  # pages the walker hands over in memory; 0 = 2 per worker + 2

    @staticmethod
    def from_settings(settings: Settings, **overrides: Any) -> ImportOptions:
        values: dict[str, Any] = {
            "lease_seconds": settings.import_lease_seconds,
            "lock_timeout_seconds": settings.import_lock_timeout_seconds,
            "debounce_seconds": settings.recalc_debounce_seconds,
            "cap_seconds": settings.recalc_cap_seconds,
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

    @property
    def items_per_second(self) -> float:
        processed = self.counters.applied + self.counters.skipped + self.counters.failed
        return processed / self.duration_seconds if self.duration_seconds > 0 else 0.0


def _aggregate(stage: TalentStage) -> str:
    """The aggregate label of chessboard_import_items_total: Developer .. PropertyObject."""
    return stage.entity[:1].upper() + stage.entity[1:]


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:1024]


class _PageCache:
    """Items the walker read, handed to this process's workers by page id (bounded: backpressure).

    A full cache first drops the pages other processes claimed meanwhile (`claimed_elsewhere`), then
    waits for this process's workers; the oldest entry goes after `evict_after` seconds at the latest.
    """

    def __init__(self, capacity: int, evict_after: float = 10.0) -> None:
        self.capacity = max(1, capacity)
        self.evict_after = evict_after
        self._items: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._cond = threading.Condition()

    def put(
        self,
        page_id: int,
        items: list[dict[str, Any]],
        stopping: Callable[[], bool],
        claimed_elsewhere: Callable[[list[int]], set[int]],
    ) -> None:
        deadline = time.monotonic() + self.evict_after
        with self._cond:
            while len(self._items) >= self.capacity and not stopping():
                ids = list(self._items)
                self._cond.release()  # no lock held while asking the store
                try:
                    stale = claimed_elsewhere(ids)
                finally:
                    self._cond.acquire()
                for stale_id in stale:
                    self._items.pop(stale_id, None)
                if len(self._items) < self.capacity:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._items.popitem(last=False)  # its claimer re-fetches it by cursor
                    break
                self._cond.wait(min(remaining, 0.2))
            self._items[page_id] = items

    def take(self, page_id: int) -> list[dict[str, Any]] | None:
        with self._cond:
            items = self._items.pop(page_id, None)
            self._cond.notify_all()
            return items


class ImportSession:
    """One import run held by this process: the advisory lock, the run row, the source, the stages."""

    def __init__(
        self,
        url: str,
        request: TalentInitialImportRequest,
        source: ImportSource,
        *,
        options: ImportOptions | None = None,
        apply: ApplyFn | None = None,
        should_stop: Callable[[], bool] | None = None,
        dagster_run_id: str | None = None,
    ) -> None:
        self.url = url
        self.engine = get_engine(url)
        self.request = request
        self.source = source
        self.options = options or ImportOptions()
        self.dagster_run_id = dagster_run_id
        self._apply = apply or getattr(source, "apply", None) or apply_snapshots
        self._external_stop = should_stop
        self._stop = threading.Event()
        self.lock = AdvisoryLock(url)
        self.run: runs.Row | None = None
        self.resumed = False
        self.handbook: Handbook | None = None
        self.dry_run_state = DryRunState() if request.dry_run else None
        self.reports: dict[str, StageReport] = {}
        self._walker = True  # False: a worker that joined someone else's run (no lock, no walk)

    # -- identity

    @property
    def run_row(self) -> runs.Row:
        assert self.run is not None, "open() or attach() first"
        return self.run

    @property
    def loaded_handbook(self) -> Handbook:
        assert self.handbook is not None, "open() or attach() first"
        return self.handbook

    @property
    def run_id(self) -> UUID:
        return self.run_row["id"]

    @property
    def correlation_id(self) -> str:
        return self.run["correlation_id"] if self.run is not None else self.request.correlation_id

    @property
    def page_size(self) -> int:
        # A resumed run keeps its page size: its cursors belong to walks with that limit.
        return int(self.run["page_size"]) if self.run is not None else self.request.page_size

    @property
    def scope_keys(self) -> list[str]:
        return list(self.run["scopes"]) if self.run is not None else self.request.scope_keys

    def _fields(self, stage: str | None = None, page_no: int | None = None) -> str:
        parts = [
            f"run_id={self.run['id'] if self.run is not None else '-'}",
            f"correlation_id={self.correlation_id}",
        ]
        if stage is not None:
            parts.append(f"stage={stage}")
        if page_no is not None:
            parts.append(f"page_no={page_no}")
        return " ".join(parts)

    # -- stopping

    def should_stop(self) -> bool:
        if self._stop.is_set():
            return True
        if self._external_stop is not None and self._external_stop():
            self._stop.set()
            return True
        return False

    def request_stop(self) -> None:
        """Cancellation: the workers finish their current page, nothing new is claimed."""
        self._stop.set()

    # -- lifecycle

    def open(self) -> ImportSession:
        """Source availability, the lock, then the run row (created, or resumed) - seed 004, step 1-2.

        Refusals (Refused) happen before anything is written.
        """
        self.source.check_available()
        self.lock.acquire(self.options.lock_timeout_seconds, should_stop=self.should_stop)
        try:
            with self.engine.begin() as conn:
                self.run, self.resumed = runs.start_or_resume_run(conn, self.request, self.dagster_run_id)
                self.handbook = load_handbook(conn)
        except BaseException:
            self.lock.release()
            raise
        IMPORT_RUNNING.set(1)
        log.info(
            "import-%s %s mode=%s dry_run=%s scopes=%s page_size=%d workers=%d",
            "resumed" if self.resumed else "started",
            self._fields(),
            self.run_row["mode"],
            self.run_row["dry_run"],
            ",".join(k or "all" for k in self.scope_keys),
            self.page_size,
            self.request.workers,
        )
        return self

    def attach(self, run_id: UUID) -> ImportSession:
        """Join a run another process holds, as extra page workers (no lock, no walk)."""
        with self.engine.connect() as conn:
            self.run = runs.get_run(conn, run_id)
            if self.run is None:
                raise ValueError(f"no import run {run_id}")
            self.handbook = load_handbook(conn)
        self._walker = False
        return self

    def finish(self, status: RunStatus, error: str | None = None) -> TalentInitialImportResult:
        """Run row -> Completed / Failed / Cancelled with its stage counters summed from the pages."""
        with self.engine.begin() as conn:
            row = runs.finish_run(conn, self.run_id, status, error)
        self.run = row
        result = runs.result_of(row)
        totals = result.totals
        level = logging.INFO if status == RunStatus.COMPLETED else logging.WARNING
        log.log(
            level,
            "import-%s %s planned=%d applied=%d skipped=%d failed=%d duration_s=%.1f%s",
            status.value.lower(),
            self._fields(),
            totals.planned,
            totals.applied,
            totals.skipped,
            totals.failed,
            result.duration_seconds,
            f" error={error!r}" if error else "",
        )
        return result

    def close(self) -> None:
        """Releases the lock (every case) and the source's connections."""
        try:
            if self.lock.held:
                IMPORT_RUNNING.set(0)
            self.lock.release()
        finally:
            self.source.close()

    def run_stages(self, stages: Sequence[TalentStage] = STAGES) -> TalentInitialImportResult:
        """Every stage in order, then the run's final status; the lock is released in every case."""
        try:
            status, error = RunStatus.COMPLETED, None
            try:
                for stage in stages:
                    if self.run_stage(stage).cancelled:
                        status = RunStatus.CANCELLED
                        break
            except StageFailed as e:
                status, error = RunStatus.FAILED, str(e)
            except KeyboardInterrupt:
                self.finish(RunStatus.CANCELLED, "interrupted")
                raise
            except BaseException as e:
                self.finish(RunStatus.FAILED, _describe(e))
                raise
            return self.finish(status, error)
        finally:
            self.close()

    # -- one stage

    def stage_complete(self, stage: TalentStage) -> bool:
        with self.engine.connect() as conn:
            return runs.stage_state(conn, self.run_id, stage.name).complete(self.scope_keys)

    def run_stage(self, stage: TalentStage) -> StageReport:
        """Plans and processes one stage until its barrier: every walk ended, every page Done."""
        started = time.monotonic()
        work = _StageWork(self, stage)
        threads = [
            threading.Thread(target=work.work, name=f"import-{stage.name}-{i}", daemon=True)
            for i in range(self.request.workers)
        ]
        if self._walker and not self.stage_complete(stage):
            threads.insert(
                0, threading.Thread(target=work.walk, name=f"import-{stage.name}-walk", daemon=True)
            )
        else:
            work.walk_done.set()
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)  # short joins: an interrupt reaches this (main) thread promptly
        except BaseException:
            self.request_stop()
            for thread in threads:
                thread.join()  # the current pages finish or roll back
            raise
        if work.error is not None:
            raise work.error
        with self.engine.begin() as conn:
            counters = runs.sum_stage_counters(conn, self.run_id)[stage.name]
            state = runs.stage_state(conn, self.run_id, stage.name)
        complete = state.complete(self.scope_keys)
        report = StageReport(
            stage=stage.name,
            counters=counters,
            pages=state.pages,
            pages_processed=work.pages_processed,
            duration_seconds=time.monotonic() - started,
            cancelled=not complete,
            page_durations_ms=work.page_durations_ms,
        )
        self.reports[stage.name] = report
        if complete:
            IMPORT_THROUGHPUT.set(report.items_per_second)
            log.info(
                "stage-completed %s pages=%d planned=%d applied=%d skipped=%d failed=%d "
                "duration_s=%.2f items_per_s=%.0f",
                self._fields(stage.name),
                report.pages,
                counters.planned,
                counters.applied,
                counters.skipped,
                counters.failed,
                report.duration_seconds,
                report.items_per_second,
            )
        else:
            log.warning(
                "stage-cancelled %s pages=%d done=%d", self._fields(stage.name), state.pages, state.done
            )
        return report


class _StageWork:
    """The walker and the workers of one stage in this process, and what they share."""

    def __init__(self, session: ImportSession, stage: TalentStage) -> None:
        self.session = session
        self.stage = stage
        self.options = session.options
        self.cache = _PageCache(self.options.cache_pages or 2 * session.request.workers + 2)
        self.walk_done = threading.Event()
        self.wakeup = threading.Condition()
        self.error: BaseException | None = None
        self.pages_processed = 0
        self.page_durations_ms: list[float] = []
        self._lock = threading.Lock()
        self.context = ApplyContext(
            correlation_id=session.correlation_id,
            handbook=session.loaded_handbook,
            debounce_seconds=self.options.debounce_seconds,
            cap_seconds=self.options.cap_seconds,
            run_id=session.run_id,
            stage=stage.name,
            dry_run=bool(session.run_row["dry_run"]),
            dry_run_state=session.dry_run_state,
        )

    # -- shared state

    def stopping(self) -> bool:
        return self.error is not None or self.session.should_stop()

    def fail(self, error: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = (
                    error
                    if isinstance(error, StageFailed)
                    else StageFailed(f"stage {self.stage.name} failed: {_describe(error)}")
                )
        self._notify()

    def _notify(self) -> None:
        with self.wakeup:
            self.wakeup.notify_all()

    def _wait_for_work(self) -> None:
        with self.wakeup:
            self.wakeup.wait(self.options.idle_poll_seconds)

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self.stopping() and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    # -- planning

    def walk(self) -> None:
        """Records the pages of every scope's listing (Pending), going on from the last recorded one."""
        session, stage = self.session, self.stage
        try:
            for scope_key in session.scope_keys:
                if not self._walk_scope(scope_key):
                    return
            with session.engine.connect() as conn:
                planned = runs.stage_state(conn, session.run_id, stage.name)
            log.info("stage-planned %s pages=%d", session._fields(stage.name), planned.pages)
        except BaseException as e:
            self.fail(e)
        finally:
            self.walk_done.set()
            self._notify()

    def _walk_scope(self, scope_key: str) -> bool:
        """False when the walk stopped early (cancelled or failed)."""
        session, stage = self.session, self.stage
        failures = 0
        while not self.stopping():
            with session.engine.connect() as conn:
                last = runs.last_planned_page(conn, session.run_id, stage.name, scope_key)
            if last is not None and last["is_last"]:
                return True
            page_no = 0 if last is None else last["page_no"] + 1
            start = None if last is None else last["next_cursor"]
            walked = 0
            try:
                for planned in session.source.plan_pages(
                    stage, Scope.from_key(scope_key), page_size=session.page_size, start=start
                ):
                    items = planned.items
                    with session.engine.begin() as conn:
                        page_id = runs.insert_page(
                            conn,
                            session.run_id,
                            stage.name,
                            scope_key,
                            page_no,
                            planned.cursor,
                            planned.next_cursor,
                            len(items) if items is not None else 0,
                        )
                    if page_id is not None:
                        IMPORT_PAGES.labels(stage.name, "Planned").inc()
                        if items is not None:
                            self.cache.put(page_id, items, self.stopping, self._claimed_elsewhere)
                        self._notify()
                    page_no += 1
                    walked += 1
                    failures = 0
                    if self.stopping():
                        return False
                if walked == 0:  # a source that yields nothing still ends its walk with an empty page
                    with session.engine.begin() as conn:
                        page_id = runs.insert_page(
                            conn, session.run_id, stage.name, scope_key, page_no, start, None, 0
                        )
                    if page_id is not None:
                        self.cache.put(page_id, [], self.stopping, self._claimed_elsewhere)
                        self._notify()
                return True
            except TalentCancelled:
                return False
            except TalentPermanentError as e:
                raise StageFailed(f"stage {stage.name}: planning failed: {e}") from None
            except Exception as e:
                failures += 1
                IMPORT_PAGES.labels(stage.name, "Failed").inc()
                log.warning(
                    "page-failed %s scope=%s planning attempt=%d error=%r",
                    session._fields(stage.name, page_no),
                    scope_key or "all",
                    failures,
                    _describe(e),
                )
                if failures >= self.options.page_attempts:
                    raise StageFailed(
                        f"stage {stage.name}: planning page {page_no} failed {failures} times: {_describe(e)}"
                    ) from None
                self._sleep(self.options.retry_seconds)
        return False

    def _claimed_elsewhere(self, page_ids: list[int]) -> set[int]:
        """Cached pages that are no longer Pending: another process claimed them (ours take the
        items out of the cache when they claim)."""
        with self.session.engine.connect() as conn:
            return runs.claimed_pages(conn, page_ids)

    # -- processing

    def work(self) -> None:
        session = self.session
        try:
            while not self.stopping():
                with session.engine.begin() as conn:
                    page = runs.claim_page(conn, session.run_id, self.stage.name, self.options.lease_seconds)
                if page is None:
                    if self.walk_done.is_set() and self._barrier_reached():
                        return
                    self._wait_for_work()
                    continue
                self._process(page)
        except BaseException as e:
            self.fail(e)

    def _barrier_reached(self) -> bool:
        with self.session.engine.connect() as conn:
            state = runs.stage_state(conn, self.session.run_id, self.stage.name)
        if state.failed:
            self.fail(StageFailed(f"stage {self.stage.name}: {state.failed} page(s) Failed"))
        return state.complete(self.session.scope_keys)

    def _process(self, page: runs.ClaimedPage) -> None:
        session, stage = self.session, self.stage
        started = time.perf_counter()
        log.debug("page-claimed %s scope=%s", session._fields(stage.name, page.page_no), page.scope or "all")
        try:
            items = self.cache.take(page.id)
            if items is None:  # read outside the page transaction
                items = session.source.fetch_page(
                    stage, page.cursor, Scope.from_key(page.scope), page_size=session.page_size
                )
            with session.engine.begin() as conn:
                if not runs.hold_claimed_page(conn, page):
                    log.warning(
                        "page-lost %s: the claim was taken over", session._fields(stage.name, page.page_no)
                    )
                    return
                result = session._apply(conn, stage.entity, items, self.context)
                runs.complete_page(conn, page, len(items), result)
        except TalentCancelled:
            with session.engine.begin() as conn:
                runs.release_page(conn, page)
            return
        except Exception as e:
            self._record_failure(page, e, permanent=isinstance(e, TalentPermanentError))
            return
        elapsed_ms = (time.perf_counter() - started) * 1000
        self._account(page, result, len(items), elapsed_ms)

    def _record_failure(self, page: runs.ClaimedPage, error: Exception, permanent: bool) -> None:
        session, stage = self.session, self.stage
        IMPORT_PAGES.labels(stage.name, "Failed").inc()
        with session.engine.begin() as conn:
            attempts = runs.record_page_failure(
                conn, page, _describe(error), self.options.retry_seconds, permanent=permanent
            )
        log.warning(
            "page-failed %s scope=%s attempts=%s permanent=%s error=%r",
            session._fields(stage.name, page.page_no),
            page.scope or "all",
            attempts,
            permanent,
            _describe(error),
        )
        if permanent or (attempts or 0) >= self.options.page_attempts:
            self.fail(
                StageFailed(
                    f"stage {stage.name}: page {page.page_no} failed {attempts} time(s): {_describe(error)}"
                )
            )

    def _account(self, page: runs.ClaimedPage, result: ApplyResult, planned: int, elapsed_ms: float) -> None:
        session, stage = self.session, self.stage
        aggregate = _aggregate(stage)
        IMPORT_PAGES.labels(stage.name, "Done").inc()
        IMPORT_PAGE_DURATION.observe(elapsed_ms)
        for name in ("applied", "skipped", "failed"):
            count = getattr(result, name)
            if count:
                IMPORT_ITEMS.labels(aggregate, name).inc(count)
        # quarantined items and unknown enum values are logged and counted by the apply path
        log.info(
            "page-applied %s scope=%s items=%d items_applied=%d items_skipped=%d items_failed=%d events=%d ms=%.0f",
            session._fields(stage.name, page.page_no),
            page.scope or "all",
            planned,
            result.applied,
            result.skipped,
            result.failed,
            result.events,
            elapsed_ms,
        )
        with self._lock:
            self.pages_processed += 1
            self.page_durations_ms.append(elapsed_ms)


def run_import(
    url: str,
    request: TalentInitialImportRequest,
    source: ImportSource,
    *,
    enabled: bool = True,
    options: ImportOptions | None = None,
    apply: ApplyFn | None = None,
    should_stop: Callable[[], bool] | None = None,
    dagster_run_id: str | None = None,
) -> TalentInitialImportResult:
    """The whole import in this process (seed 004): refusals first, then every stage, then the result.

    Raises Refused (flag off, source unavailable, lock held) before writing anything; a failed stage
    ends the run Failed (resumable) and is reported in the result, not raised.
    """
    if not enabled:
        raise Refused("feature flag chessboard.talent-sync.enabled is off", IMPORT_DISABLED)
    session = ImportSession(
        url,
        request,
        source,
        options=options,
        apply=apply,
        should_stop=should_stop,
        dagster_run_id=dagster_run_id,
    )
    try:
        session.open()
    except BaseException:
        session.source.close()
        raise
    return session.run_stages()

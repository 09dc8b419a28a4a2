"""The import run manager (docs/talent-initial-import.md): lock, run row, stages behind barriers.

One `ImportSession` is one import run held by this process: it checks the source, takes the
advisory lock, creates or resumes the run row and runs the stages in order (stage_runner.py; the
page workers in page_worker.py process each page in ONE transaction: apply + Done mark and
counters). The source is read before the transaction; events go to the outbox in it and to Kafka
after commit (relay).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.entities import ENTITIES, Entity
from pin_chessboard_pipelines.errors import IMPORT_LOCK_HELD, Refused, RunEnded, StageFailed, error_line
from pin_chessboard_pipelines.events.payloads import Handbook
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.recalc.queue import release_ended_import_requests, release_import_requests
from pin_chessboard_pipelines.replica.apply import DryRunState, apply_snapshots
from pin_chessboard_pipelines.retry import Retrier
from pin_chessboard_pipelines.stopper import Stopper
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.handbook_replica import HandbookCache, load_handbook
from pin_chessboard_pipelines.talent_import import page_queue, page_worker, runs, stage_runner
from pin_chessboard_pipelines.talent_import.lock import ImportLock
from pin_chessboard_pipelines.talent_import.model import ApplyFn, ImportOptions, StageReport
from pin_chessboard_pipelines.talent_import.planner_statistics import refresh_statistics
from pin_chessboard_pipelines.talent_import.request import RunStatus, TalentInitialImportRequest
from pin_chessboard_pipelines.talent_import.result import TalentInitialImportResult
from pin_chessboard_pipelines.talent_import.sources import ImportSource

log = logging.getLogger("pin_chessboard_pipelines.talent_import")


class ImportSession:
    """One import run held by this process: the advisory lock, the run row, the source, the stages."""

    def __init__(
        self,
        store: Engine | str,
        request: TalentInitialImportRequest,
        source: ImportSource,
        *,
        options: ImportOptions | None = None,
        apply: ApplyFn | None = None,
        should_stop: Callable[[], bool] | None = None,
        dagster_run_id: str | None = None,
    ) -> None:
        self.engine = store if isinstance(store, Engine) else get_engine(store)
        self.url = self.engine.url  # the lock's and the walks' sessions of their own
        self.request = request
        self.source = source
        self.options = options or ImportOptions()
        self.dagster_run_id = dagster_run_id
        self.apply_items: ApplyFn = apply or getattr(source, "apply", None) or apply_snapshots
        self._external_stop = should_stop
        self._stop = threading.Event()
        self.lock = ImportLock(self.url)
        self.run: runs.Row | None = None
        self.resumed = False
        self.opened_here = False  # this process started or resumed the run row (not joined it)
        self.handbook: Handbook | None = None
        # what each page's transaction publishes with: read again there after a rename (store/handbook_replica.py)
        self.handbooks = HandbookCache()
        self.dry_run_state = DryRunState() if request.dry_run else None
        self.reports: dict[str, StageReport] = {}
        # while this process holds the import (the CLI waits for its Dagster run meanwhile)
        self._heartbeat: page_worker.Heartbeat | None = None
        # the root span of this process's share of the run (README "Traces"): open() to close()
        self.trace_span: tracing.Span = tracing.INVALID_SPAN

    # -- identity

    @property
    def run_row(self) -> runs.Row:
        assert self.run is not None, "open() or join() first"
        return self.run

    @property
    def loaded_handbook(self) -> Handbook:
        assert self.handbook is not None, "open() or join() first"
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

    def log_fields(self, stage: str | None = None, page_no: int | None = None) -> dict[str, Any]:
        """RunId, CorrelationId (and Stage, PageNo) of the import's log lines."""
        fields: dict[str, Any] = {
            "RunId": self.run["id"] if self.run is not None else "-",
            "CorrelationId": self.correlation_id,
        }
        if stage is not None:
            fields["Stage"] = stage
        if page_no is not None:
            fields["PageNo"] = page_no
        return fields

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

    def open(self, *, keep_lock: bool = True) -> ImportSession:
        """Source availability, the lock, then the run row (created, or resumed).

        Refusals (Refused) happen before anything is written: the source is unavailable, or another
        import still runs when the lock timeout is spent (it holds the advisory lock, or its run row
        is Running with a fresh heartbeat). `keep_lock`: this process holds the import for its whole
        run (the CLI); a Dagster step lets go once the row is written (the pool and the row's
        heartbeat keep other imports out; docs/talent-initial-import.md#advisory-lock).
        """
        self.source.check_available()
        started = time.monotonic()
        timeout = self.options.lock_timeout_seconds
        self.lock.acquire(timeout, should_stop=self.should_stop)
        try:
            after_lock = getattr(self.source, "after_lock", None)
            if after_lock is not None:  # TopicReplay's group reset: only once the lock is held
                after_lock()
            self.run, self.resumed = self._start_or_resume(deadline=started + timeout, keep_lock=keep_lock)
            with self.engine.connect() as conn:
                self.handbook = load_handbook(conn)
                self.handbooks = HandbookCache(self.handbook)
        except BaseException:
            self.lock.release()
            raise
        self.opened_here = True
        if not keep_lock:
            self.lock.release()
        else:
            self._heartbeat = page_worker.Heartbeat(self).start()
        self._load_dry_run_state()
        self._start_trace()
        log_event(
            log,
            logging.INFO,
            "import-resumed" if self.resumed else "import-started",
            **self.log_fields(),
            Mode=self.run_row["mode"],
            DryRun=self.run_row["dry_run"],
            Scopes=",".join(k or "all" for k in self.scope_keys),
            PageSize=self.page_size,
            Workers=self.request.workers,
            Processes=self.request.processes,
        )
        return self

    def _start_or_resume(self, deadline: float, keep_lock: bool) -> tuple[runs.Row, bool]:
        """Under the lock: the run row, once no other import's run is alive (until `deadline`)."""
        options = self.options
        while True:
            try:
                with self.engine.begin() as conn:
                    row, resumed = runs.start_or_resume_run(
                        conn,
                        self.request,
                        self.dagster_run_id,
                        alive_seconds=options.alive_seconds,
                        debounce_seconds=options.debounce_seconds,
                        cap_seconds=options.cap_seconds,
                    )
                    runs.mark_lock_held(conn, row["id"], keep_lock)
                    # a run abandoned or marked failed before this one: its held requests become due
                    release_ended_import_requests(
                        conn, debounce_seconds=options.debounce_seconds, cap_seconds=options.cap_seconds
                    )
                    return runs.get_run(conn, row["id"]) or row, resumed
            except runs.RunAlive as alive:
                if time.monotonic() >= deadline or self.should_stop():
                    raise Refused(
                        f"another talent initial import is running: {alive}, its heartbeat renewed "
                        f"within {options.alive_seconds:g} s; gave up after "
                        f"{options.lock_timeout_seconds:g} s",
                        IMPORT_LOCK_HELD,
                    ) from None
                Stopper(self.should_stop).sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def join(self, admit: Callable[[ImportSession], None] | None = None) -> ImportSession:
        """This process's share of the import of `request.correlation_id`: the Running row of this
        Dagster run if there is one (the CLI or another step opened it), else opened (started or
        resumed) here. Every step of a run rebuilds its session this way, from the database.
        `admit` runs before a row is opened here: it raises Refused to keep the run from starting."""
        with self.engine.connect() as conn:
            row = None if self.dagster_run_id is None else runs.run_of_dagster_run(conn, self.dagster_run_id)
            if row is None:
                row = runs.latest_run_of_correlation(conn, self.request.correlation_id)
            if (
                row is not None
                and row["status"] == RunStatus.RUNNING.value
                and (self.dagster_run_id is None or row["dagster_run_id"] == self.dagster_run_id)
            ):
                self.run = row
                # a step of the run is alive: the barrier and plan steps beat too, so a run of many
                # short steps on a loaded machine never looks dead between its page steps
                runs.touch_run(conn, row["id"])
                conn.commit()
                self.handbook = load_handbook(conn)
                self.handbooks = HandbookCache(self.handbook)
                self._load_dry_run_state()
                self._start_trace()
                return self
            if (
                row is not None
                and self.dagster_run_id is not None
                and row["dagster_run_id"] == self.dagster_run_id
            ):
                # another step of this Dagster run ended it (a page failed for good, a cancel)
                raise RunEnded(row["status"], row["error"])
        if admit is not None:
            admit(self)
        return self.open(keep_lock=False)

    def _load_dry_run_state(self) -> None:
        """A DryRun's view of what its earlier stages 'applied' (each stage may run in another process)."""
        if self.dry_run_state is not None:
            with self.engine.connect() as conn:
                self.dry_run_state = runs.latest_dry_run_state(conn, self.run_id) or self.dry_run_state

    def save_dry_run_state(self, stage: Entity) -> None:
        if self.dry_run_state is not None:
            with self.engine.begin() as conn:
                runs.save_dry_run_state(conn, self.run_id, stage.stage, self.dry_run_state.to_json())

    def _start_trace(self) -> None:
        """The import run span; its trace id follows the CorrelationId, so a resumed run (another
        Dagster run of the same root) adds to the same trace."""
        self.trace_span = tracing.root_span(
            "talent_import.run",
            {
                "pin.import.run_id": self.run_id,
                "pin.correlation_id": self.correlation_id,
                "pin.import.mode": self.run_row["mode"],
                "pin.import.dry_run": bool(self.run_row["dry_run"]),
                "pin.import.resumed": self.resumed,
            },
            trace_key=self.correlation_id,
        )

    def end(self, status: RunStatus, error: str | None = None) -> runs.Row | None:
        """Ends the run if it still runs (another process may have ended it first): Failed or
        Cancelled with its counters, its held recalc requests due. None when it had ended."""
        if self.run is None:
            return None
        row = self._write_end(status, error, if_running=True)
        if row is not None:
            self.run = row
            log_event(
                log,
                logging.WARNING,
                f"import-{status.value.lower()}",
                **self.log_fields(),
                **({"Error": repr(error)} if error else {}),
            )
        return row

    def _write_end(self, status: RunStatus, error: str | None, *, if_running: bool) -> runs.Row | None:
        """The run row's end and its held recalc requests released (due: one per touched project),
        in one transaction; a database that restarts meanwhile is waited for."""

        def write() -> runs.Row | None:
            with self.engine.begin() as conn:
                release_import_requests(
                    conn,
                    self.run_id,
                    debounce_seconds=self.options.debounce_seconds,
                    cap_seconds=self.options.cap_seconds,
                )
                end = runs.end_running_run if if_running else runs.finish_run
                return end(conn, self.run_id, status, error)

        return Retrier(self.options.page_retry_seconds, fields=self.log_fields)("end the run", write)

    def finish(self, status: RunStatus, error: str | None = None) -> TalentInitialImportResult:
        """Run row -> Completed / Failed / Cancelled with its stage counters summed from the pages;
        first the planner statistics of the tables the run filled, before its requests are due."""
        self._analyze()
        row = self._write_end(status, error, if_running=False)
        assert row is not None
        self.run = row
        if status == RunStatus.COMPLETED:
            self._hand_over()
        result = runs.result_of(row)
        totals = result.totals
        self.trace_span.set_attributes(
            {
                "pin.import.status": status.value,
                "pin.import.planned": totals.planned,
                "pin.import.applied": totals.applied,
                "pin.import.failed": totals.failed,
            }
        )
        tracing.end_span(self.trace_span, error if status != RunStatus.COMPLETED else None)
        level = logging.INFO if status == RunStatus.COMPLETED else logging.WARNING
        log_event(
            log,
            level,
            f"import-{status.value.lower()}",
            **self.log_fields(),
            Planned=totals.planned,
            Applied=totals.applied,
            Skipped=totals.skipped,
            Failed=totals.failed,
            DurationSeconds=f"{result.duration_seconds:.1f}",
            **({"Error": repr(error)} if error else {}),
        )
        return result

    def _analyze(self) -> None:
        """The planner statistics of the tables the run filled (not a dry run's: it writes none)."""
        if not self.run_row["dry_run"]:
            refresh_statistics(self.engine, self.log_fields())

    def _hand_over(self) -> None:
        """TopicReplay: the consumer group goes on where a complete, unscoped replay ended."""
        on_completed = getattr(self.source, "on_completed", None)
        if on_completed is None or self.run_row["dry_run"] or any(self.scope_keys):
            return  # a scoped replay applied part of each partition: the group stays at 0
        with self.engine.connect() as conn:
            cursors = page_queue.page_cursors(conn, self.run_id)
        try:
            on_completed(cursors)
        except Exception as error:  # noqa: BLE001 - the replay is complete; talent-sync re-reads (idempotent)
            log_event(
                log, logging.ERROR, "handover-failed", **self.log_fields(), Error=repr(error_line(error))
            )

    def close(self) -> None:
        """Releases the lock (every case) and the source's connections."""
        tracing.end_span(self.trace_span)  # a no-op when finish() ended it
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
        try:
            self.lock.release()
        finally:
            self.source.close()

    def run_here(self) -> TalentInitialImportResult:
        """The whole import in this process: refusals first, then every stage, then the result.

        Raises Refused (source unavailable, lock held) before writing anything; a failed stage ends
        the run Failed (resumable) and is reported in the result, not raised. The feature flag is
        the caller's (talent/flag.py), asked by each entry point."""
        try:
            self.open()
        except BaseException:
            self.source.close()
            raise
        return self.run_stages()

    def run_stages(self, stages: Sequence[Entity] = ENTITIES) -> TalentInitialImportResult:
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
                self.finish(RunStatus.FAILED, error_line(e))
                raise
            return self.finish(status, error)
        finally:
            self.close()

    # -- one stage

    def stage_complete(self, stage: Entity) -> bool:
        return stage_runner.stage_complete(self, stage)

    def work_stage(self, stage: Entity) -> StageReport:
        """This process's share of one stage (a Dagster page step), until the stage's barrier."""
        with tracing.span(
            "talent_import.stage",
            {"pin.import.run_id": self.run_id, "pin.import.stage": stage.stage, "pin.import.process": True},
            parent=tracing.context_of(self.trace_span),
        ):
            report = stage_runner.work_stage(self, stage)
        self.save_dry_run_state(stage)
        return report

    def run_stage(self, stage: Entity) -> StageReport:
        """Plans and processes one stage until its barrier: every walk ended, every page Done."""
        with tracing.span(
            "talent_import.stage",
            {"pin.import.run_id": self.run_id, "pin.import.stage": stage.stage},
            parent=tracing.context_of(self.trace_span),
        ) as span:
            report = stage_runner.run_stage(self, stage)
            self.save_dry_run_state(stage)
            span.set_attributes(
                {
                    "pin.import.planned": report.counters.planned,
                    "pin.import.applied": report.counters.applied,
                    "pin.import.failed": report.counters.failed,
                    "pin.import.pages": report.pages,
                    "pin.import.cancelled": report.cancelled,
                }
            )
        self.reports[stage.stage] = report
        return report


__all__ = ["ImportOptions", "ImportSession", "StageReport"]

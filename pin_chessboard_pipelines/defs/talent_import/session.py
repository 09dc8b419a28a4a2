"""The import session of a Dagster run: opened by the run's first stage asset (or by
`pin-chessboard import` before it launches the run), shared by its assets through the correlation
id (= the root run id, so "Re-execute from failure" resumes the same import run row), ended by the
last stage (docs/talent-initial-import.md#resume).
"""

import threading
import time
from collections.abc import Callable

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.config import (
    PARTITIONS,
    STOP_PROBE_SECONDS,
    TalentImportConfig,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import developer_id_of
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import import runs, sessions
from pin_chessboard_pipelines.talent_import.request import RunStatus, build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import make_source


class RunStopProbe:
    """should_stop of a Dagster run: terminated (CANCELING/CANCELED), looked up at most every
    STOP_PROBE_SECONDS (the run worker also gets an interrupt; this catches a terminate that does not
    deliver one)."""

    def __init__(self, instance: dg.DagsterInstance, run_id: str, every: float | None = None) -> None:
        self.instance, self.run_id = instance, run_id
        self.every = STOP_PROBE_SECONDS if every is None else every
        self._lock = threading.Lock()
        self._next = 0.0
        self._stopped = False

    def __call__(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if not self._stopped and now >= self._next:
                self._next = now + self.every
                run = self.instance.get_run_by_id(self.run_id)
                self._stopped = run is not None and run.status in (
                    dg.DagsterRunStatus.CANCELING,
                    dg.DagsterRunStatus.CANCELED,
                )
            return self._stopped


def correlation_id_of(context: dg.AssetExecutionContext) -> str:
    return context.run.root_run_id or context.run.run_id


def developer_ids_of(context: dg.AssetExecutionContext) -> list[str]:
    """The partitions of the run as DeveloperIdFilter; [] when every partition is selected."""
    keys = list(context.partition_keys)
    known = set(context.instance.get_dynamic_partitions(PARTITIONS))
    return [] if set(keys) >= known else list(dict.fromkeys(developer_id_of(key) for key in keys))


def open_session(
    settings: Settings,
    database_url: str,
    config: TalentImportConfig,
    *,
    correlation_id: str,
    developer_ids: list[str],
    dagster_run_id: str | None,
    should_stop: Callable[[], bool] | None = None,
) -> ImportSession:
    """Flag, request, source, lock and run row of an import (refusals raise Refused), registered
    under its correlation id for the assets of the run."""
    require_talent_sync_enabled(settings)
    request = build_request(
        mode=config.mode,
        developer_ids=[] if config.project_id_filter else developer_ids,
        project_id=config.project_id_filter,
        page_size=config.page_size if config.page_size is not None else settings.import_page_size,
        dry_run=config.dry_run,
        correlation_id=correlation_id,
        workers=config.workers,
    )
    source = make_source(
        request.mode,
        settings,
        should_stop=should_stop,
        dry_run=request.dry_run,
        engine=get_engine(database_url),
    )
    session = ImportSession(
        database_url,
        request,
        source,
        options=ImportOptions.from_settings(settings),
        should_stop=should_stop,
        dagster_run_id=dagster_run_id,
    )
    try:
        session.open()
    except BaseException:
        source.close()
        raise
    sessions.register(correlation_id, session)
    return session


def end_session(correlation_id: str, status: RunStatus, error: str | None = None) -> runs.Row | None:
    """Finishes the run row of a registered session and releases its lock; None if none is open."""
    session = sessions.pop(correlation_id)
    if session is None:
        return None
    try:
        session.finish(status, error)
        return session.run
    finally:
        session.close()

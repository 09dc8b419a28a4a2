"""The import session of a step: every step of an import's Dagster run (in its own process with the
multiprocess or Kubernetes executor) rebuilds it from the run row of its correlation id (= the root
run id, so "Re-execute from failure" resumes the same import run row). The first step of the run
starts or resumes that row unless `pin-chessboard import` did before it launched the run; the last
stage's barrier completes it (docs/talent-initial-import.md#resume).
"""

import threading
import time
from collections.abc import Callable, Sequence

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.config import (
    PARTITIONS,
    STOP_PROBE_SECONDS,
    TalentImportConfig,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import developer_id_of
from pin_chessboard_pipelines.errors import IMPORT_INVALID_REQUEST, ChessboardError, Refused, RunEnded
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.talent.flag import require_talent_sync_enabled
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.request import TalentInitialImportRequest, build_request
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


# Dagster's tags: the backfill a run belongs to, and on the runs of a re-executed backfill ("Re-execute
# from failure" on a backfill's page: a new backfill) the backfill the chain started from
BACKFILL_TAG = "dagster/backfill"
ROOT_BACKFILL_TAG = "dagster/root_backfill_id"


def correlation_id_of(context: dg.AssetExecutionContext) -> str:
    return import_correlation_id(context.instance, context.run)


def import_correlation_id(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """The CorrelationId of a Dagster run's import: its root run's id (a run re-executed from its
    page), and for a run of a re-executed backfill the one of its root backfill's first run, so each
    resume finds the same import run (docs/talent-initial-import.md#resume)."""
    root = instance.get_run_by_id(run.root_run_id) if run.root_run_id else None
    origin = root or run
    backfill = origin.tags.get(ROOT_BACKFILL_TAG)
    if backfill:
        first = instance.get_runs(
            filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill}), limit=1, ascending=True
        )
        if first:
            return first[0].run_id
    return origin.run_id


def is_resume(run: dg.DagsterRun) -> bool:
    """A re-execution from failure of a run, or a run of a re-executed backfill: it resumes an
    import, never starts one of its own. The UI tags a re-execution from failure; one through
    Dagster's Python API (`ReexecutionOptions.from_failure`) runs a subset of its root run's steps.
    "Re-execute all" of a run is a new import of its own."""
    from_failure = run.is_resume_retry or (
        run.root_run_id is not None and run.step_keys_to_execute is not None
    )
    return from_failure or bool(run.tags.get(ROOT_BACKFILL_TAG))


def re_execution_refusal(instance: dg.DagsterInstance, run: dg.DagsterRun, engine: Engine) -> str | None:
    """The one line refusing a re-execution whose import run has Completed (a second "Re-execute
    from failure": nothing to resume, docs/talent-initial-import.md#resume); None for any other run.
    The run's executor asks before any step starts (defs/executors.py: the run then ends Success,
    tagged pin/refused, no asset touched); a step asks again when it joins (two resumes racing)."""
    if not is_resume(run):
        return None
    correlation_id = import_correlation_id(instance, run)
    with engine.connect() as conn:
        latest = runs.latest_run_of_correlation(conn, correlation_id)
    refusal = runs.resume_refusal(correlation_id, latest)
    return None if refusal is None else Refused(refusal, IMPORT_INVALID_REQUEST).line()


def developer_ids_of(context: dg.AssetExecutionContext) -> list[str]:
    """The partitions of the run as DeveloperIdFilter; [] when every partition is selected."""
    keys = list(context.partition_keys)
    known = set(context.instance.get_dynamic_partitions(PARTITIONS))
    return [] if set(keys) >= known else list(dict.fromkeys(developer_id_of(key) for key in keys))


def mixed_filters_refusal(project_id: str, keys: Sequence[str], owners: Sequence[str] | None) -> str | None:
    """Why a run with ProjectIdFilter may not run on the partitions `keys` (None: it may).

    The filters are mutually exclusive (docs/talent-initial-import.md#filters): a project re-sync
    runs on its own developer's partition alone, the one its materialization belongs to. `owners`:
    the Talent ids of the project's developer (None: not looked up yet, enough when `keys` is not one
    partition)."""
    clash = f"project_id_filter {project_id} and the developer partitions of the run are mutually exclusive"
    if len(keys) != 1:
        return f"{clash}: the run selects {len(keys)} partitions; run the project on its developer's partition alone"
    if owners is None:
        return None
    developer = developer_id_of(keys[0]).lower()
    if developer in {owner.lower() for owner in owners}:
        return None
    owner = f"belongs to developer {owners[0]}" if owners else "is not listed by Talent"
    return f"{clash}: the project {owner}, the run's partition is {keys[0]}; clear project_id_filter or run the project's developer"


def step_session(
    context: dg.AssetExecutionContext, chessboard: ChessboardResource, config: TalentImportConfig
) -> ImportSession:
    """This step's share of the run's import, rebuilt from the database (nothing of another step's
    process is needed): the Running row of this Dagster run, or the run started or resumed here
    (refusals raise dg.Failure with the one line)."""
    keys = list(context.partition_keys)
    project_id = config.project_id_filter

    def admit(session: ImportSession) -> None:
        """Before this step starts the run row: a project filter on another developer is refused,
        and so is a re-execution whose import run has Completed (a second resume)."""
        if is_resume(context.run):
            with session.engine.connect() as conn:
                latest = runs.latest_run_of_correlation(conn, session.correlation_id)
            refusal = runs.resume_refusal(session.correlation_id, latest)
            if refusal:
                raise Refused(refusal, IMPORT_INVALID_REQUEST)
        if project_id:
            owners = [developer for developer, _ in session.source.developers(project_id)]
            refusal = mixed_filters_refusal(project_id, keys, owners)
            if refusal:
                raise Refused(refusal, IMPORT_INVALID_REQUEST)

    try:
        refusal = mixed_filters_refusal(project_id, keys, None) if project_id else None
        if refusal:
            raise Refused(refusal, IMPORT_INVALID_REQUEST)
        session = build_session(
            chessboard.settings,
            chessboard.engine,
            config,
            correlation_id=correlation_id_of(context),
            # a project's re-sync runs on its developer's partition: the project is the filter
            developer_ids=[] if project_id else developer_ids_of(context),
            dagster_run_id=context.run.run_id,
            should_stop=RunStopProbe(context.instance, context.run.run_id),
        )
    except ChessboardError as error:
        raise dg.Failure(description=error.line()) from None
    try:
        session.join(admit=admit)
    except ChessboardError as error:
        session.close()
        # a run another step ended stays ended: no attempt of the step's retry policy would join it
        raise dg.Failure(description=error.line(), allow_retries=not isinstance(error, RunEnded)) from None
    except BaseException:
        session.close()
        raise
    return session


def import_request(
    settings: Settings, config: TalentImportConfig, developer_ids: list[str], correlation_id: str
) -> TalentInitialImportRequest:
    """The TalentInitialImportRequest of `config` (an invalid one raises Refused with its line)."""
    return build_request(
        mode=config.mode,
        developer_ids=developer_ids,
        project_id=config.project_id_filter,
        page_size=config.page_size if config.page_size is not None else settings.import_page_size,
        dry_run=config.dry_run,
        correlation_id=correlation_id,
        workers=config.workers,
        processes=config.processes,
    )


def build_session(
    settings: Settings,
    engine: Engine,
    config: TalentImportConfig,
    *,
    correlation_id: str,
    developer_ids: list[str],
    dagster_run_id: str | None,
    should_stop: Callable[[], bool] | None = None,
) -> ImportSession:
    """Flag, request and source of an import (refusals raise Refused); open() or join() it next."""
    require_talent_sync_enabled(settings)
    request = import_request(settings, config, developer_ids, correlation_id)
    source = make_source(
        request.mode, settings, should_stop=should_stop, dry_run=request.dry_run, engine=engine
    )
    return ImportSession(
        engine,
        request,
        source,
        options=ImportOptions.from_settings(settings),
        should_stop=should_stop,
        dagster_run_id=dagster_run_id,
    )

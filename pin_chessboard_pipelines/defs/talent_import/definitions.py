"""Dagster shell of the talent initial import (seed 004): six partitioned assets over talent_import/.

developers -> projects -> buildings -> layout_groups -> layouts -> property_objects share one
DynamicPartitionsDefinition keyed by Talent developer id; the dependency edges are the seed's stage
barriers. Materializing one partition re-syncs one developer (DeveloperIdFilter); a run over all
partitions (single-run backfill) lists the source without a developer filter. The rest of
TalentInitialImportRequest comes from the `talent_import` resource's launchpad config; the
CorrelationId is the Dagster run's root run id, so "Re-execute from failure" resumes the same
import run row.
"""

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.errors import IMPORT_DISABLED, ChessboardError, Refused
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.client import TalentSourceError
from pin_chessboard_pipelines.talent.topics import STAGES, TalentStage
from pin_chessboard_pipelines.talent_import import runs, sessions
from pin_chessboard_pipelines.talent_import.request import RunStatus, build_request
from pin_chessboard_pipelines.talent_import.runner import (
    ImportOptions,
    ImportSession,
    StageFailed,
    StageReport,
)
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource, make_source

GROUP = "talent_import"
PARTITIONS = "talent_developers"
TALENT_DEVELOPERS = dg.DynamicPartitionsDefinition(name=PARTITIONS)
IMPORT_JOB = "talent_initial_import"
DISCOVERY_JOB = "talent_developers_discovery"
QUARANTINE_CHECK = "no_quarantined_items"
STUCK_CHECK = "import_not_stuck"
STOP_PROBE_SECONDS = 0.25  # how often a step looks whether its run was terminated
STUCK_SECONDS = 600  # seed 004 alert: running without pages Done growing for 10 min
# dagster.yaml limits runs per value of this tag: imports queue instead of waiting on the lock.
SINGLETON_TAGS = {"pin/singleton": IMPORT_JOB}


def asset_name(stage: TalentStage) -> str:
    """developers, projects, buildings, layout_groups, layouts, property_objects."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in stage.name).lstrip("_")


ASSET_KEYS = {stage.name: dg.AssetKey(asset_name(stage)) for stage in STAGES}
PROPERTY_OBJECTS_KEY = ASSET_KEYS["PropertyObjects"]


class TalentImportConfig(dg.ConfigurableResource):
    """The launchpad's TalentInitialImportRequest (resources.talent_import.config); the
    DeveloperIdFilter is the partition selection and the CorrelationId the root run id."""

    mode: str = "ApiPull"
    page_size: int | None = None  # None = CHESSBOARD_IMPORT_PAGE_SIZE
    project_id_filter: str | None = None  # a Talent project id: re-sync that project only
    dry_run: bool = False
    workers: int = 2  # parallel page workers


# ---------------------------------------------------------------------------------------------
# The stage step


class _RunStopProbe:
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
    return [] if set(keys) >= known else keys


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
    if not settings.talent_sync_enabled:
        raise Refused("feature flag chessboard.talent-sync.enabled is off", IMPORT_DISABLED)
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


def _stages_in_run(context: dg.AssetExecutionContext) -> list[str]:
    """The stage assets this Dagster run executes, in stage order (the last one finishes the import)."""
    selected = context.job_def.asset_layer.selected_asset_keys
    steps = context.run.step_keys_to_execute
    return [
        stage.name
        for stage in STAGES
        if ASSET_KEYS[stage.name] in selected and (steps is None or asset_name(stage) in steps)
    ]


def _p99(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _metadata(session: ImportSession, report: StageReport) -> dict[str, Any]:
    counters = report.counters
    return {
        "import_run_id": dg.MetadataValue.text(str(session.run_id)),
        "correlation_id": dg.MetadataValue.text(session.correlation_id),
        "import_status": dg.MetadataValue.text(str(session.run_row["status"])),
        "scopes": dg.MetadataValue.text(", ".join(k or "all developers" for k in session.scope_keys)),
        "dry_run": dg.MetadataValue.bool(bool(session.run_row["dry_run"])),
        "planned": dg.MetadataValue.int(counters.planned),
        "applied": dg.MetadataValue.int(counters.applied),
        "skipped": dg.MetadataValue.int(counters.skipped),
        "failed": dg.MetadataValue.int(counters.failed),
        "pages": dg.MetadataValue.int(report.pages),
        "pages_processed": dg.MetadataValue.int(report.pages_processed),
        "duration_seconds": dg.MetadataValue.float(round(report.duration_seconds, 3)),
        "items_per_second": dg.MetadataValue.float(round(report.items_per_second, 1)),
        "page_p99_ms": dg.MetadataValue.float(round(_p99(report.page_durations_ms), 1)),
    }


def _quarantine_check(session: ImportSession, stage: TalentStage, report: StageReport) -> dg.AssetCheckResult:
    """Seed 004 alert chessboard_import_failed_items_total > 0, per stage of this import run."""
    with session.engine.connect() as conn:
        by_code = [r for r in runs.failed_items_of_run(conn, session.run_id) if r["stage"] == stage.name]
    return dg.AssetCheckResult(
        check_name=QUARANTINE_CHECK,
        passed=report.counters.failed == 0,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "failed": dg.MetadataValue.int(report.counters.failed),
            "by_error_code": dg.MetadataValue.json({r["error_code"]: r["items"] for r in by_code}),
            "import_run_id": dg.MetadataValue.text(str(session.run_id)),
        },
        description="quarantined items of this stage in talent_import_failed_items (runbook: fix in Talent, replay)",
    )


def materialize_stage(
    context: dg.AssetExecutionContext,
    stage: TalentStage,
    chessboard: ChessboardResource,
    talent_import: TalentImportConfig,
) -> dg.MaterializeResult:
    correlation_id = correlation_id_of(context)
    session = sessions.get(correlation_id)
    if session is None:
        try:
            session = open_session(
                chessboard.settings,
                chessboard.url,
                talent_import,
                correlation_id=correlation_id,
                developer_ids=developer_ids_of(context),
                dagster_run_id=context.run.run_id,
                should_stop=_RunStopProbe(context.instance, context.run.run_id),
            )
        except ChessboardError as error:
            raise dg.Failure(description=error.line()) from None
        context.log.info(
            f"import run {session.run_id} {'resumed' if session.resumed else 'started'} "
            f"(correlation id {correlation_id}, scopes {session.scope_keys})"
        )
    try:
        report = session.run_stage(stage)
        if report.cancelled:
            raise DagsterExecutionInterruptedError()
    except StageFailed as error:
        end_session(correlation_id, RunStatus.FAILED, str(error))
        raise dg.Failure(
            description=f"{error} (resumable: re-execute from failure)",
            metadata={"import_run_id": str(session.run_id)},
        ) from None
    except (DagsterExecutionInterruptedError, KeyboardInterrupt):
        end_session(correlation_id, RunStatus.CANCELLED, "cancelled")
        raise
    except BaseException as error:
        end_session(correlation_id, RunStatus.FAILED, f"{type(error).__name__}: {error}"[:1024])
        raise
    if stage.name == _stages_in_run(context)[-1]:
        end_session(correlation_id, RunStatus.COMPLETED)
    if report.counters.applied and not session.request.dry_run:
        chessboard.relay_outbox(context.log)
    context.log.info(
        f"{stage.name}: planned {report.counters.planned}, applied {report.counters.applied}, "
        f"skipped {report.counters.skipped}, failed {report.counters.failed} in {report.pages} pages"
    )
    return dg.MaterializeResult(
        metadata=_metadata(session, report),
        check_results=[_quarantine_check(session, stage, report)],
    )


def _stage_asset(stage: TalentStage, parent: TalentStage | None) -> dg.AssetsDefinition:
    key = ASSET_KEYS[stage.name]

    @dg.asset(
        key=key,
        group_name=GROUP,
        partitions_def=TALENT_DEVELOPERS,
        backfill_policy=dg.BackfillPolicy.single_run(),
        deps=[ASSET_KEYS[parent.name]] if parent else [],
        kinds={"postgres"},
        description=f"Talent {stage.entity} replicas in chessboard.{asset_name(stage)} "
        f"(stage {stage.name} of talent-initial-import)",
        check_specs=[
            dg.AssetCheckSpec(
                QUARANTINE_CHECK, asset=key, description="no item of this stage was quarantined"
            )
        ],
    )
    def _asset(
        context: dg.AssetExecutionContext, chessboard: ChessboardResource, talent_import: TalentImportConfig
    ) -> dg.MaterializeResult:
        return materialize_stage(context, stage, chessboard, talent_import)

    return _asset


with warnings.catch_warnings():
    # single-run backfills are what the seed asks for (one import run over all partitions)
    warnings.simplefilter("ignore", dg.BetaWarning)
    STAGE_ASSETS = [
        _stage_asset(stage, parent) for parent, stage in zip((None, *STAGES[:-1]), STAGES, strict=True)
    ]


# ---------------------------------------------------------------------------------------------
# Partition discovery


def list_talent_developers(settings: Settings, project_id: str | None = None) -> list[str]:
    """Talent developer ids from the API (all, or the developer of one project)."""
    source = ApiPullSource(settings.talent_api_url, settings.talent_api_token)
    try:
        return source.developer_ids(project_id)
    finally:
        source.close()


def new_developer_partitions(instance: dg.DagsterInstance, developer_ids: list[str]) -> list[str]:
    known = set(instance.get_dynamic_partitions(PARTITIONS))
    return [d for d in dict.fromkeys(developer_ids) if d not in known]


def add_developer_partitions(instance: dg.DagsterInstance, developer_ids: list[str]) -> list[str]:
    """Adds the partitions that are missing; returns them."""
    new = new_developer_partitions(instance, developer_ids)
    if new:
        instance.add_dynamic_partitions(PARTITIONS, new)
    return new


@dg.op(name="discover_talent_developers")
def discover_talent_developers(context: dg.OpExecutionContext, chessboard: ChessboardResource) -> None:
    ids = list_talent_developers(chessboard.settings)
    added = add_developer_partitions(context.instance, ids)
    context.log.info(f"Talent lists {len(ids)} developer(s); {len(added)} new partition(s)")


@dg.job(
    name=DISCOVERY_JOB, description="Lists Talent developers and adds them as talent_developers partitions"
)
def talent_developers_discovery() -> None:
    discover_talent_developers()


@dg.sensor(
    name="talent_developers_sensor",
    minimum_interval_seconds=300,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a talent_developers partition for every Talent developer",
)
def talent_developers_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource):
    try:
        ids = list_talent_developers(chessboard.settings)
    except TalentSourceError as error:
        return dg.SkipReason(f"Talent is not answering: {error}")
    new = new_developer_partitions(context.instance, ids)
    if not new:
        return dg.SkipReason(f"{len(ids)} developer(s), none new")
    return dg.SensorResult(dynamic_partitions_requests=[TALENT_DEVELOPERS.build_add_request(new)])


# ---------------------------------------------------------------------------------------------
# Alert: stuck import


def stuck_evaluation(
    chessboard: ChessboardResource, stuck_seconds: float = STUCK_SECONDS
) -> tuple[dg.AssetCheckEvaluation, list[str]]:
    """The import_not_stuck evaluation and the ids of the stuck import runs."""
    with chessboard.engine.connect() as conn:
        stuck = runs.stuck_runs(conn, stuck_seconds)
    ids = [str(r["id"]) for r in stuck]
    evaluation = dg.AssetCheckEvaluation(
        asset_key=PROPERTY_OBJECTS_KEY,
        check_name=STUCK_CHECK,
        passed=not stuck,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "stuck_runs": dg.MetadataValue.int(len(stuck)),
            "runs": dg.MetadataValue.json(
                [
                    {
                        "runId": str(r["id"]),
                        "correlationId": r["correlation_id"],
                        "lastProgressAt": r["last_progress_at"].isoformat(),
                    }
                    for r in stuck
                ]
            ),
        },
        description=f"a Running import without a page Done for {stuck_seconds:g} s"
        " (runbook: check the advisory lock holder and page leases, then resume)",
    )
    return evaluation, ids


@dg.asset_check(
    asset=PROPERTY_OBJECTS_KEY, name=STUCK_CHECK, description="no Running import without progress for 10 min"
)
def import_not_stuck(chessboard: ChessboardResource) -> dg.AssetCheckResult:
    evaluation, _ = stuck_evaluation(chessboard)
    return dg.AssetCheckResult(
        passed=evaluation.passed,
        severity=evaluation.severity,
        metadata=evaluation.metadata,
        description=evaluation.description,
    )


@dg.sensor(
    name="talent_import_stuck_sensor",
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Evaluates the import_not_stuck check of property_objects every minute",
)
def talent_import_stuck_sensor(context: dg.SensorEvaluationContext, chessboard: ChessboardResource):
    evaluation, stuck = stuck_evaluation(chessboard)
    state = "stuck:" + ",".join(stuck) if stuck else "ok"
    if state == context.cursor:
        return dg.SkipReason(f"unchanged: {state}")
    return dg.SensorResult(asset_events=[evaluation], cursor=state)


# ---------------------------------------------------------------------------------------------


talent_initial_import = dg.define_asset_job(
    IMPORT_JOB,
    selection=dg.AssetSelection.assets(*STAGE_ASSETS) - dg.AssetSelection.checks(import_not_stuck),
    tags=SINGLETON_TAGS,
    description="talent-initial-import (seed 004): the six stages over the selected developer partitions",
)


def definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=STAGE_ASSETS,
        asset_checks=[import_not_stuck],
        jobs=[talent_initial_import, talent_developers_discovery],
        sensors=[talent_developers_sensor, talent_import_stuck_sensor],
        resources={"talent_import": TalentImportConfig()},
    )

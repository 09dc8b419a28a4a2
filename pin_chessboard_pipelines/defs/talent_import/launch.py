"""The one way an import is launched, whoever asks (docs/talent-initial-import.md#launching):
`ImportLauncher(instance, engine, settings)`.

- `run_here`: `pin-chessboard import`. This process is the run worker: it waits for the import
  pool and takes the advisory lock within one CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS, opens the
  import run row (refusals happen here, before Dagster starts), adds the developer partitions and
  executes ONE run of the six assets over them as the UI would launch it, then ends the row if the
  last stage's barrier did not, and returns the result.
- `submit`: the `talent_full_bootstrap` op. The developers listed, their partitions added, ONE
  import run over the whole range is put in the run queue with the launchpad's config; the daemon
  launches it from the code location's origin.

Both build the import's run config and its partition-range tags here, once.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.defs import dagster_private as private
from pin_chessboard_pipelines.defs.fan_out import concurrent_steps_config
from pin_chessboard_pipelines.defs.in_process import execute_as_launched
from pin_chessboard_pipelines.defs.pools import ensure_pools
from pin_chessboard_pipelines.defs.singleton import NO_RUN_RETRIES
from pin_chessboard_pipelines.defs.talent_import.config import (
    BOOTSTRAP_JOB,
    IMPORT_JOB,
    PARTITIONS,
    FullBootstrapConfig,
    TalentImportConfig,
)
from pin_chessboard_pipelines.defs.talent_import.partitions import (
    add_developer_partitions,
    frozen_partition_keys,
)
from pin_chessboard_pipelines.defs.talent_import.pool import fail_runs_of_gone_imports, wait_for_import_pool
from pin_chessboard_pipelines.defs.talent_import.session import build_session
from pin_chessboard_pipelines.errors import IMPORT_LOCK_HELD, Refused, error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.retry import Retrier
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.progress import ProgressBar
from pin_chessboard_pipelines.talent_import.request import ImportMode, RunStatus
from pin_chessboard_pipelines.talent_import.result import TalentInitialImportResult
from pin_chessboard_pipelines.talent_import.runner import ImportSession
from pin_chessboard_pipelines.talent_import.sources import make_source

log = logging.getLogger("pin_chessboard_pipelines.talent_import")

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
TRIGGER_TAG = "pin/trigger"
LAUNCHED_BY_TAG = "pin/launched-by"  # the import run's tag: the talent_full_bootstrap run that submitted it


def import_run_config(config: TalentImportConfig | FullBootstrapConfig) -> dict[str, Any]:
    """An import's request as the import job's run config (its page steps all at once)."""
    return {
        "resources": {"talent_import": {"config": config.model_dump(exclude_none=True)}},
        **concurrent_steps_config(config.processes),
    }


def range_tags(partition_keys: list[str], trigger: str) -> dict[str, str]:
    """ONE run over the partitions (the tags Dagster's own "Launch as single run" sets), and what
    launched it."""
    return {RANGE_START_TAG: partition_keys[0], RANGE_END_TAG: partition_keys[-1], TRIGGER_TAG: trigger}


def import_run_tags(job_tags: dict[str, str], partition_keys: list[str], launched_by: str) -> dict[str, str]:
    """The tags of an import run the full bootstrap submits: the job's own (pin/import, max
    runtime), the whole partition range as one run, and the bootstrap run that submitted it."""
    return {**job_tags, **range_tags(partition_keys, BOOTSTRAP_JOB), LAUNCHED_BY_TAG: launched_by}


class ImportLauncher:
    """Launches imports on `instance`, with the chessboard store behind `engine`."""

    def __init__(self, instance: dg.DagsterInstance, engine: Engine, settings: Settings) -> None:
        self.instance = instance
        self.engine = engine
        self.settings = settings

    # -- the CLI: this process is the run worker --------------------------------------------------

    def run_here(
        self,
        config: TalentImportConfig,
        developer_ids: list[str],
        run_id: str,
        run_config: dict[str, Any] | None = None,
    ) -> TalentInitialImportResult:
        """The import of `config` (for `developer_ids`, none: every developer) as the Dagster run
        `run_id` executed in this process; its result once the run ended. `run_config` is added to
        the import's own (e.g. the console logger)."""
        session = self._open(config, developer_ids, run_id)
        cause: str | None = None  # why the import stopped, when it stopped before its last stage
        try:
            selected = self._partitions_of(session)
            if not selected:
                # Nothing to partition by (an empty source, or a project Talent does not list): the
                # same import, without a Dagster run.
                log.info("no developer partition to run: importing without a Dagster run")
                return session.run_stages()
            with ProgressBar(session.engine, session.run_id):
                executed = execute_as_launched(
                    self.instance,
                    IMPORT_JOB,
                    run_id=run_id,
                    run_config={**(run_config or {}), **import_run_config(config)},
                    # this process is the run worker: a killed command is resumed by running it
                    # again, not by the daemon's retry beside it (docs/deployment.md#run-retries)
                    tags={**range_tags(selected, "cli"), **NO_RUN_RETRIES},
                )
            if not executed.success:
                cause = failure_of(executed)
        except KeyboardInterrupt:
            session.end(RunStatus.CANCELLED, "interrupted")
            session.close()
            raise
        except Exception as error:  # noqa: BLE001 - before or around the Dagster run: the cause is the run's error
            cause = error_line(error)
            log_event(log, logging.ERROR, "import-failed", RunId=session.run_id, Error=repr(cause))
        # The last stage's barrier completes the run; an import that stopped before ends here.
        session.end(
            RunStatus.CANCELLED if self._cancelled(run_id) else RunStatus.FAILED,
            cause or "the import stopped before its last stage",
        )
        session.close()
        return self._result(session)

    def _open(self, config: TalentImportConfig, developer_ids: list[str], run_id: str) -> ImportSession:
        """Outside the run queue: an import run that holds the pool waited for, then the advisory
        lock, within one CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS
        (docs/talent-initial-import.md#advisory-lock); the run row opened by this process."""
        settings, started = self.settings, time.monotonic()
        ensure_pools(self.instance)
        fail_runs_of_gone_imports(  # a killed import's run is not running; its held requests are released
            self.instance,
            self.engine,
            **settings.recalc_timing,
        )
        holding = wait_for_import_pool(self.instance, settings.import_lock_timeout_seconds)
        if holding:
            raise Refused(
                f"another import is running: Dagster run {holding[0].run_id} ({holding[0].status.value})"
                f" still holds the import pool after {settings.import_lock_timeout_seconds:g}s",
                IMPORT_LOCK_HELD,
            )
        remaining = max(0.0, settings.import_lock_timeout_seconds - (time.monotonic() - started))
        session = build_session(
            dataclasses.replace(settings, import_lock_timeout_seconds=remaining),
            self.engine,
            config,
            correlation_id=run_id,
            developer_ids=developer_ids,
            dagster_run_id=run_id,
        )
        try:
            session.open()  # source availability, the lock (held until the import ends), the run row
        except BaseException:
            session.close()
            raise
        return session

    def _partitions_of(self, session: ImportSession) -> list[str]:
        """The run's partitions: the filtered developer's, the project's developer's, or all."""
        request = session.request
        developers = session.source.developers(request.project_id)
        if request.developer_ids:
            wanted = request.developer_ids[0].lower()
            names = {developer_id.lower(): name for developer_id, name in developers}
            developers = [(request.developer_ids[0], names.get(wanted, ""))]
        add_developer_partitions(self.instance, self.engine, developers)
        if request.developer_ids or request.project_id:
            known = self.instance.get_dynamic_partitions(PARTITIONS)
            return list(frozen_partition_keys(self.engine, developers[:1], known).values())
        return list(self.instance.get_dynamic_partitions(PARTITIONS))

    def _cancelled(self, run_id: str) -> bool:
        try:
            dagster_run = self.instance.get_run_by_id(run_id)
        except Exception:  # noqa: BLE001 - Dagster's storage unreachable: the run did not end by a cancel we can see
            return False
        return dagster_run is not None and dagster_run.status == dg.DagsterRunStatus.CANCELED

    def _result(self, session: ImportSession) -> TalentInitialImportResult:
        def read() -> runs.Row | None:
            with self.engine.connect() as conn:
                return runs.get_run(conn, session.run_id)

        row = Retrier(self.settings.import_page_retry_seconds)("read the import result", read)
        assert row is not None
        return runs.result_of(row)

    # -- the full bootstrap: the run queue --------------------------------------------------------

    def developers(self, config: FullBootstrapConfig) -> list[tuple[str, str]]:
        """(Talent id, name) of every developer the mode's source lists."""
        source = make_source(
            ImportMode(config.mode), self.settings, dry_run=config.dry_run, engine=self.engine
        )
        try:
            return source.developers()
        finally:
            source.close()

    def add_partitions(self, developers: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
        """(every partition key, the keys added now) after the developers' partitions are added."""
        added = add_developer_partitions(self.instance, self.engine, developers)
        return list(self.instance.get_dynamic_partitions(PARTITIONS)), added

    def submit(
        self, config: FullBootstrapConfig, keys: list[str], by: dg.DagsterRun, job: dg.JobDefinition
    ) -> str:
        """ONE import run over `keys` created as the UI's launch would (the location's origin of the
        run `by`, the job's snapshot) and put in the run queue; its run id. A re-execution of a
        failed bootstrap that had submitted its import returns that one (queued now if its submit
        never happened)."""
        earlier = earlier_import(self.instance, by)
        if earlier is not None:
            if (
                earlier.status == dg.DagsterRunStatus.NOT_STARTED
            ):  # created, the worker died before the submit
                self.instance.submit_run(earlier.run_id, workspace=None)  # type: ignore[arg-type]
            return earlier.run_id
        assert by.remote_job_origin is not None and by.job_code_origin is not None
        run = self.instance.create_run_for_job(
            job_def=job,
            run_config=import_run_config(config),
            tags=import_run_tags(dict(job.run_tags), keys, by.run_id),
            remote_job_origin=private.RemoteJobOrigin(by.remote_job_origin.repository_origin, IMPORT_JOB),
            job_code_origin=private.JobPythonOrigin(IMPORT_JOB, by.job_code_origin.repository_origin),
        )
        # the QueuedRunCoordinator only enqueues: the daemon launches the run from its origin
        self.instance.submit_run(run.run_id, workspace=None)  # type: ignore[arg-type]
        return run.run_id


def earlier_import(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRun | None:
    """The import run a failed run this one re-executes submitted (its parent, or the parent's
    parent while they failed): a bootstrap whose worker died after the submit and was retried by
    the daemon (dagster.yaml `run_retries`) or re-executed from failure hands that import on, it
    never submits a second one. None for a first run or one whose failed parents submitted none."""
    parent_id = run.parent_run_id
    while parent_id is not None:
        parent = instance.get_run_by_id(parent_id)
        if parent is None or parent.status != dg.DagsterRunStatus.FAILURE:
            return None
        submitted = instance.get_runs(filters=dg.RunsFilter(tags={LAUNCHED_BY_TAG: parent_id}), limit=1)
        if submitted:
            return submitted[0]
        parent_id = parent.parent_run_id
    return None


def failure_of(executed: Any) -> str | None:
    """The first step failure's one-line description of an executed run, if any."""
    for event in executed.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            failure = event.step_failure_data
            if failure.user_failure_data is not None and failure.user_failure_data.description:
                return failure.user_failure_data.description.splitlines()[0]
            if failure.error is not None:
                return failure.error.message.strip().splitlines()[0]
    return None

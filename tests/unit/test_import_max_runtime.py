"""Seed 004's maximum duration of a bootstrap (6 h) rides on Dagster's run monitoring: every import
run carries `dagster/max_runtime`, the instance monitors runs, and the monitor ends a run past it."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import dagster as dg
import yaml

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import import config as talent_config
from pin_chessboard_pipelines.defs.talent_import.definitions import definitions
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from tests.support.dagster_private import check_run_timeout


def _import_job() -> dg.JobDefinition:
    defs = dg.Definitions.merge(definitions(), dg.Definitions(resources={"chessboard": ChessboardResource()}))
    return defs.resolve_job_def("talent_initial_import")


def test_every_import_run_carries_the_six_hour_max_runtime():
    assert talent_config.MAX_RUNTIME_SECONDS == 6 * 3600
    assert _import_job().tags["dagster/max_runtime"] == "21600"
    # an asset run started from the UI gets them with its first stage (defs/talent_import/assets.py)
    assert talent_config.IMPORT_TAGS["dagster/max_runtime"] == "21600"


def test_the_instance_monitors_runs():
    instance = yaml.safe_load((PROJECT_ROOT / "dagster.yaml").read_text(encoding="utf-8"))
    monitoring = instance["run_monitoring"]
    assert monitoring["enabled"] is True and monitoring["poll_interval_seconds"] <= 60


def test_the_monitor_ends_an_import_run_past_its_max_runtime():
    with dg.instance_for_test() as instance:
        young = instance.create_run_for_job(_import_job(), tags=dict(talent_config.IMPORT_TAGS))
        old = instance.create_run_for_job(_import_job(), tags=dict(talent_config.IMPORT_TAGS))
        now = time.time()
        log = logging.getLogger("test")
        check_run_timeout(instance, SimpleNamespace(dagster_run=young, start_time=now - 5 * 3600), log, 0)
        check_run_timeout(instance, SimpleNamespace(dagster_run=old, start_time=now - 6 * 3600 - 60), log, 0)
        assert instance.get_run_by_id(young.run_id).status == dg.DagsterRunStatus.NOT_STARTED
        # the in-memory test launcher cannot terminate: the monitor marks the run failed itself
        assert instance.get_run_by_id(old.run_id).status in (
            dg.DagsterRunStatus.CANCELING,
            dg.DagsterRunStatus.FAILURE,
        )
        messages = [
            record.event_log_entry.dagster_event.message
            for record in instance.get_records_for_run(old.run_id).records
            if record.event_log_entry.dagster_event is not None
        ]
        assert any("maximum runtime of 21600 seconds" in (m or "") for m in messages)

"""`pin-chessboard inventory`: today's `project_inventory_daily` materialized through the Dagster
instance (a run of its job, in the UI's history), which `make demo` runs so that an analyst's first
view of the asset is not "Never materialized"."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import dagster as dg
import pytest

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.defs.analytics.definitions import ASSET_KEY, JOB_NAME
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.runtime.demo import DEMO_STEPS
from tests.support.recalc_data import StoreBuilder, standard_project


def test_inventory_materializes_today_through_the_instance(cli_env, engine, capsys):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        for name in ("ЖК Первый", "ЖК Второй"):
            b.request(standard_project(b, name=name))
    drain(engine, batch_size=50, poison_attempts=5)  # aggregates computed: no drift to refuse on
    today = datetime.now(UTC).date().isoformat()
    assert main(["inventory"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Completed" and summary["day"] == today
    assert summary["projects"] == 2 and summary["free_objects"] > 0
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(summary["runId"])
        assert run is not None and run.job_name == JOB_NAME
        assert run.tags["dagster/partition"] == today
        [record] = instance.fetch_materializations(ASSET_KEY, limit=1).records
        assert record.run_id == run.run_id and record.partition_key == today


def test_an_invalid_day_is_refused_in_one_line(cli_env, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["inventory", "--day", "yesterday"])
    assert exit_info.value.code == 2
    assert "is not a day (YYYY-MM-DD)" in capsys.readouterr().err
    assert main(["inventory", "--day", "1999-01-01"]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "project_inventory_daily has the days" in line


def test_the_demo_materializes_todays_inventory_after_the_audit():
    commands = [args for _, args in DEMO_STEPS]
    assert ["inventory"] in commands
    assert commands.index(["inventory"]) > commands.index(["recalc", "audit"])

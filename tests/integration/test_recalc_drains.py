"""CHESSBOARD_RECALC_DRAINS: one recalc run with two drain steps in two OS processes
(Dagster's multiprocess executor) shares the queue: both recalculate, each project exactly once,
the audit finds nothing (operations.md "Scale-out and deployment (v1.2)")."""

from __future__ import annotations

from collections import Counter

import dagster as dg
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.executors import MULTIPROCESS_EXECUTOR
from pin_chessboard_pipelines.defs.recalc.definitions import (
    drain_op_names,
    drain_run_config,
    drain_step_keys,
    recalc_job,
)
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.entities import PROJECT
from pin_chessboard_pipelines.events.payloads import topic_of
from pin_chessboard_pipelines.recalc.audit import audit
from tests.support.recalc_data import queue
from tests.support.recalc_load import load

PROJECTS = 1500


def two_drains() -> dg.JobDefinition:
    """The job as a step process rebuilds it (the store's URL from CHESSBOARD_DATABASE_URL)."""
    return recalc_job(resource_defs={"chessboard": ChessboardResource()}).with_executor_def(
        MULTIPROCESS_EXECUTOR
    )


def test_the_drain_job_has_the_same_steps_whatever_the_environment(monkeypatch):
    shapes = []
    for drains in ("1", "3"):
        monkeypatch.setenv("CHESSBOARD_RECALC_DRAINS", drains)
        shapes.append(sorted(node.name for node in recalc_job().graph.nodes))
    assert shapes[0] == shapes[1] == sorted(["start_drains", "drain_0", "drain"])
    assert drain_op_names(2) == ["drain_0", "drain"]
    assert set(drain_run_config(2, {"until_empty": True})["ops"]) == {"start_drains", "drain_0", "drain"}


def test_a_run_starts_the_drains_of_the_environment_when_its_config_names_none(db_url, monkeypatch, tmp_path):
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    monkeypatch.setenv("CHESSBOARD_RECALC_DRAINS", "3")
    job = recalc_job(resource_defs={"chessboard": ChessboardResource()})
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = job.execute_in_process(instance=instance)
    assert result.success
    started = sorted(e.step_key for e in result.all_events if e.is_step_success)
    assert started == ["drain[1]", "drain[2]", "drain_0", "start_drains"]


def test_two_drain_processes_in_one_run_recalculate_each_project_once(db_url, engine, monkeypatch, tmp_path):
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    load(engine, "drains-", PROJECTS, 20)
    with (
        dg.instance_for_test(temp_dir=str(tmp_path)) as instance,
        dg.execute_job(
            dg.reconstructable(two_drains),
            instance=instance,
            run_config=drain_run_config(2, {"until_empty": True}),
        ) as result,
    ):
        assert result.success
        steps = {}
        for name in drain_op_names(2):
            (output,) = [e for e in result.events_for_node(name) if e.is_successful_output]
            steps[name] = output.step_output_data.metadata["summary"].value
        pids = {
            e.step_key: e.pid
            for e in result.all_events
            if e.is_step_start and e.step_key in drain_step_keys(2)
        }
    assert len(set(pids.values())) == 2  # two drains, two OS processes
    recalculated = {name: summary["recalculated"] for name, summary in steps.items()}
    assert all(n > 0 for n in recalculated.values()), recalculated  # both drains took rows
    assert sum(recalculated.values()) == PROJECTS  # and none twice
    with engine.connect() as conn:
        assert queue(conn) == {}
        assert audit(conn) == []
        events = conn.execute(
            sa.text("SELECT message_key FROM chessboard.outbox_messages WHERE topic = :t"),
            {"t": topic_of(PROJECT.upserted_event)},
        ).scalars()
        per_project = Counter(events)
    assert len(per_project) == PROJECTS and set(per_project.values()) == {1}

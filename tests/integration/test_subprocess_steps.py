"""A job of the project through a step-delegating executor whose steps are OS processes
(tests/support/subprocess_executor.py): the code path of the k8s executor, every step in a process
of its own that reads its configuration from the environment, as a step pod does."""

from __future__ import annotations

import os
import socket

import dagster as dg
import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.recalc.checks import AUDIT_CHECK, AUDIT_JOB_NAME, POISON_CHECK
from pin_chessboard_pipelines.recalc.drain import drain
from tests.support.polling import wait_until
from tests.support.recalc_data import StoreBuilder, standard_project
from tests.support.subprocess_executor import reconstructable_project_job, step_pids

pytestmark = pytest.mark.slow


def _running(pid: int) -> bool:
    """The process exists and has not exited (an exited child not yet reaped is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def test_the_audit_job_runs_each_check_in_a_process_of_its_own(db_url, engine, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b)
        b.request(project)
    drain(engine)
    with engine.begin() as conn:  # drift the audit reports: a stored counter no formula gives
        conn.execute(
            sa.text("UPDATE chessboard.projects SET property_objects_free_count = 99 WHERE id = :p"),
            {"p": project.id},
        )

    with dg.instance_for_test() as instance:
        result = dg.execute_job(reconstructable_project_job(AUDIT_JOB_NAME), instance=instance)
        pids = step_pids(instance, result.run_id)
        evaluations = {
            record.event_log_entry.dagster_event.event_specific_data.check_name: (
                record.event_log_entry.dagster_event.event_specific_data
            )
            for record in instance.get_records_for_run(
                result.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
            ).records
        }

    assert result.success
    assert len(pids) == 2  # the two checks, two steps
    assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
    assert not evaluations[AUDIT_CHECK].passed
    assert evaluations[AUDIT_CHECK].metadata["divergences"].value == 1
    assert evaluations[POISON_CHECK].passed
    wait_until(
        lambda: not any(_running(pid) for pid in pids.values()), timeout=30, what="step processes ended"
    )


def test_an_import_stage_runs_its_page_steps_in_processes_of_their_own(
    db_url, engine, monkeypatch, talent_sim
):
    """The import through the step-delegating executor (the k8s executor's path without a
    cluster): each stage's plan, page steps and barrier in processes of their own, the page steps
    sharing the stage's pages, every page Done, the run Completed by its last stage. Two stages
    (developers, projects) prove it; a process per step makes each stage cost seconds."""
    from pin_chessboard_pipelines.defs.talent_import.config import ASSET_KEYS, IMPORT_JOB, PARTITIONS
    from pin_chessboard_pipelines.talent.simulator import dataset
    from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

    spec = DatasetSpec(developers=2, projects_per_developer=4, latency_ms=20)
    sim = talent_sim(spec)
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    monkeypatch.setenv("TALENT_API_URL", sim.url)
    developers = [dataset.entity_id(spec, "developers", i) for i in range(spec.developers)]
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(PARTITIONS, developers)
        result = dg.execute_job(
            reconstructable_project_job(IMPORT_JOB),
            instance=instance,
            run_config={
                "execution": {"config": {"max_concurrent": 3}},
                "resources": {"talent_import": {"config": {"processes": 2, "workers": 1, "page_size": 1}}},
            },
            tags={
                "dagster/asset_partition_range_start": developers[0],
                "dagster/asset_partition_range_end": developers[-1],
            },
            asset_selection=[ASSET_KEYS["Developers"], ASSET_KEYS["Projects"]],
        )
        pids = step_pids(instance, result.run_id)
    assert result.success
    pages = [s for s in pids if s.startswith("projects.projects_pages[")]
    assert sorted(pages) == [f"projects.projects_pages[{i}]" for i in range(2)]
    assert {s.split(".")[0] for s in pids} == {"developers", "projects"}
    assert len(set(pids.values())) == len(pids) and os.getpid() not in pids.values()
    with engine.connect() as conn:
        run_status = conn.execute(sa.text("SELECT status FROM chessboard.talent_import_runs")).scalar_one()
        statuses = (
            conn.execute(sa.text("SELECT DISTINCT status FROM chessboard.talent_import_pages"))
            .scalars()
            .all()
        )
        claimants = (
            conn.execute(
                sa.text(
                    "SELECT DISTINCT claimed_by FROM chessboard.talent_import_pages WHERE stage = 'Projects'"
                )
            )
            .scalars()
            .all()
        )
        projects = conn.execute(sa.text("SELECT count(*) FROM chessboard.projects")).scalar_one()
        # every page read from Talent once, by the walk: its items from the walker's memory or staged
        read_from = set(
            conn.execute(
                sa.text("SELECT DISTINCT items_read_from FROM chessboard.talent_import_pages")
            ).scalars()
        )
        staged_left = conn.execute(
            sa.text("SELECT count(*) FROM chessboard.talent_import_staged_pages")
        ).scalar()
    assert run_status == "Completed" and statuses == ["Done"]
    assert read_from <= {"walk", "staged"} and staged_left == 0
    assert projects == dataset.count(spec, "projects")
    assert set(claimants) <= {f"{socket.gethostname()}:{pid}" for pid in pids.values()}

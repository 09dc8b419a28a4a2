"""Resume, re-claims and transient source failures of the import (docs/talent-initial-import.md#resume)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import sqlalchemy as sa

from pin_chessboard_pipelines.entities import DEVELOPER, ENTITIES, PROPERTY_OBJECT
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec, FaultRule
from pin_chessboard_pipelines.talent_import import page_queue, runs
from pin_chessboard_pipelines.talent_import.request import RunStatus, build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource
from tests.support.import_probe import (
    CLIENT,
    FAST,
    SPEC,
    ProbeApply,
    create_probe_tables,
    page_statuses,
    probe_import,
    scalar,
)

TOTAL = 2 + 4 + 4 + 8 + 12 + 28  # SPEC: developers, projects, buildings, layout groups, layouts, objects


def _applications(engine) -> tuple[int, int]:
    """(applications, distinct items) in the probe log."""
    with engine.connect() as conn:
        return tuple(
            conn.execute(
                sa.text("SELECT count(*), count(DISTINCT (entity, talent_id)) FROM public.import_probe_log")
            ).one()
        )


def _page_rows(engine, run_id, stage):
    with engine.connect() as conn:
        return {
            row["page_no"]: row
            for row in conn.execute(
                sa.text(
                    "SELECT page_no, status, updated_at, attempts, last_error FROM chessboard.talent_import_pages"
                    " WHERE run_id = :r AND stage = :s"
                ),
                {"r": run_id, "s": stage},
            ).mappings()
        }


def _killed_mid_stage(db_url, engine, sim):
    """An import process killed while it applies page 2 of the property objects; its run row."""
    killed = subprocess.run(
        [sys.executable, "-m", "tests.support.import_probe", db_url, sim.url, "propertyObject", "3", "4"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == 137, killed.stderr[-2000:]
    with engine.connect() as conn:
        run = conn.execute(sa.text("SELECT * FROM chessboard.talent_import_runs")).mappings().one()
    assert run["status"] == "Running"  # nobody could say otherwise: the process died
    return run


def test_resume_after_a_kill_applies_the_staged_page_in_flight_without_reading_it_again(
    db_url, engine, talent_sim
):
    create_probe_tables(engine)
    sim = talent_sim(SPEC)
    run = _killed_mid_stage(db_url, engine, sim)
    walked = sim.page_hits("property-objects", 2)
    assert walked == 1  # the walk read it, then the process died while applying it
    result = probe_import(db_url, sim, ProbeApply())
    assert result.run_id == str(run["id"]) and result.status == "Completed"
    assert _applications(engine) == (TOTAL, TOTAL)
    assert sim.page_hits("property-objects", 2) == walked  # applied from the staged items
    with engine.connect() as conn:
        read_from = conn.execute(
            sa.text(
                "SELECT items_read_from FROM chessboard.talent_import_pages"
                " WHERE run_id = :r AND stage = 'PropertyObjects' AND page_no = 2"
            ),
            {"r": run["id"]},
        ).scalar()
        staged = conn.execute(sa.text("SELECT count(*) FROM chessboard.talent_import_staged_pages")).scalar()
    assert read_from == "staged" and staged == 0  # the run ended: nothing staged is left


def test_resume_after_a_kill_mid_stage_replays_no_done_page(db_url, engine, talent_sim):
    create_probe_tables(engine)
    sim = talent_sim(SPEC)
    run = _killed_mid_stage(db_url, engine, sim)
    before = _page_rows(engine, run["id"], "PropertyObjects")
    assert [before[n]["status"] for n in (0, 1, 2)] == ["Done", "Done", "InProgress"]
    applied_before, _ = _applications(engine)
    assert applied_before == TOTAL - 28 + 8  # the dying page's rows were rolled back with it
    # a PostgreSQL crash empties the unlogged staging table: the pages are read again by cursor
    with engine.begin() as conn:
        conn.execute(sa.text("TRUNCATE chessboard.talent_import_staged_pages"))

    # the re-fetch of the page in flight meets a 503, the next page a malformed body: both recovered
    sim.set_spec(
        DatasetSpec(
            **{
                **SPEC.__dict__,
                "faults": (
                    FaultRule("property-objects", 2, "503"),
                    FaultRule("property-objects", 3, "malformed"),
                ),
            }
        )
    )
    result = probe_import(db_url, sim, ProbeApply())
    assert result.run_id == str(run["id"]) and result.status == "Completed"
    after = _page_rows(engine, run["id"], "PropertyObjects")
    assert all(row["status"] == "Done" for row in after.values())
    assert [after[n]["updated_at"] for n in (0, 1)] == [before[n]["updated_at"] for n in (0, 1)]
    assert _applications(engine) == (TOTAL, TOTAL)  # every item exactly once over both attempts
    assert result.stages["PropertyObjects"].planned == 28
    assert sim.page_hits("property-objects", 2) >= 2


def test_a_page_failing_beyond_the_bounded_retries_fails_the_run_and_a_resume_completes(
    db_url, engine, talent_sim
):
    create_probe_tables(engine)
    broken = DatasetSpec(**{**SPEC.__dict__, "faults": (FaultRule("property-objects", 2, "malformed", 100),)})
    sim = talent_sim(broken)
    request = build_request(page_size=4, workers=2)
    # a malformed body is transient: retried with backoff until the page-retry budget is spent
    options = ImportOptions(
        lock_timeout_seconds=0.3, retry_seconds=0.05, idle_poll_seconds=0.02, page_retry_seconds=0.5
    )

    def session():
        return ImportSession(
            db_url,
            request,
            ApiPullSource(sim.url, client_options={**CLIENT, "max_attempts": 1}),
            options=options,
            apply=ProbeApply(),
        )

    failed = session().open().run_stages()
    assert failed.status == "Failed"
    with engine.connect() as conn:
        error = conn.execute(
            sa.text("SELECT error FROM chessboard.talent_import_runs WHERE id = :r"), {"r": failed.run_id}
        ).scalar()
    assert "PropertyObjects" in error and "malformed" in error
    pages = page_statuses(engine, failed.run_id)
    assert set(pages["Layouts"]) == {"Done"}
    assert pages["PropertyObjects"][:2] == ["Done", "Done"]

    sim.set_spec(SPEC)  # the source is healthy again
    again = session()  # Dagster's "Re-execute from failure": the same correlation id
    result = again.open().run_stages()
    assert again.resumed
    assert result.run_id == failed.run_id and result.status == "Completed"
    assert result.stages["PropertyObjects"].planned == 28
    applications, items = _applications(engine)
    assert applications == items == TOTAL  # the Done pages were not applied again


def test_an_expired_lease_is_reclaimed_and_the_old_claim_cannot_finish(db_url, engine, talent_sim):
    create_probe_tables(engine)
    sim = talent_sim(SPEC)
    request = build_request(page_size=1)
    with engine.begin() as conn:
        run, _ = runs.start_or_resume_run(conn, request, None)
        cursor = dataset.encode_cursor("developers", 1)  # the simulator's cursor of the second page
        page_queue.insert_page(conn, run["id"], "Developers", "", 0, None, cursor, 1)
        page_queue.insert_page(conn, run["id"], "Developers", "", 1, cursor, None, 1)
    with engine.begin() as conn:
        first = page_queue.claim_page(conn, run["id"], "Developers", lease_seconds=600)
        second = page_queue.claim_page(conn, run["id"], "Developers", lease_seconds=600)
        assert page_queue.claim_page(conn, run["id"], "Developers", lease_seconds=600) is None  # both leased
    assert (first.page_no, second.page_no) == (0, 1)
    with engine.begin() as conn:  # the first worker stalls past its lease
        conn.execute(
            sa.text(
                "UPDATE chessboard.talent_import_pages SET lease_until = now() - interval '1 second' WHERE id = :i"
            ),
            {"i": first.id},
        )
    with engine.begin() as conn:
        again = page_queue.claim_page(conn, run["id"], "Developers", lease_seconds=600)
    assert again.id == first.id and again.claim_token != first.claim_token
    with engine.begin() as conn:
        assert not page_queue.hold_claimed_page(conn, first)  # the stale worker may not apply it
        assert page_queue.hold_claimed_page(conn, again)

    # a worker of another process joins the run and finishes the stage, re-claimed page included
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE chessboard.talent_import_pages SET lease_until = now() - interval '1 second'")
        )
    joined = ImportSession(
        db_url, request, ApiPullSource(sim.url, client_options=CLIENT), options=FAST, apply=ProbeApply()
    )
    report = joined.join().run_stage(DEVELOPER)  # the Running row of its correlation id
    assert not report.cancelled and report.pages_processed == 2
    assert page_statuses(engine, run["id"])["Developers"] == ["Done", "Done"]


def test_workers_of_two_sessions_on_one_stage_never_apply_a_page_twice(db_url, engine, talent_sim):
    create_probe_tables(engine)
    spec = DatasetSpec(developers=2, projects_per_developer=5, objects_per_project=40)
    sim = talent_sim(spec)
    request = build_request(page_size=3, workers=3)
    holder = ImportSession(
        db_url, request, ApiPullSource(sim.url, client_options=CLIENT), options=FAST, apply=ProbeApply()
    )
    holder.open()
    for stage in ENTITIES[:-1]:
        holder.run_stage(stage)
    # a second session (what another process does): rebuilt from the run row, its own threads and
    # source; the two share nothing but the pages (real processes: tests/e2e/test_import_processes.py)
    joined = ImportSession(
        db_url, request, ApiPullSource(sim.url, client_options=CLIENT), options=FAST, apply=ProbeApply()
    )
    joined.join()
    reports = {}
    other = threading.Thread(target=lambda: reports.setdefault("joined", joined.run_stage(PROPERTY_OBJECT)))
    other.start()
    reports["holder"] = holder.run_stage(PROPERTY_OBJECT)
    other.join(60)
    result = holder.finish(RunStatus.COMPLETED)
    holder.close()
    pages = -(-400 // 3)
    assert reports["holder"].pages_processed + reports["joined"].pages_processed == pages
    assert reports["joined"].pages_processed > 0
    with engine.connect() as conn:
        twice = conn.execute(
            sa.text(
                "SELECT count(*) FROM (SELECT talent_id FROM public.import_probe_log"
                " WHERE entity = 'propertyObject' GROUP BY talent_id HAVING count(*) > 1) AS t"
            )
        ).scalar()
    assert twice == 0
    assert result.stages["PropertyObjects"].applied == 400
    assert (
        scalar(engine, "SELECT count(*) FROM public.import_probe_log WHERE entity = 'propertyObject'") == 400
    )


def test_a_dead_claimants_page_is_claimed_again_and_a_live_ones_is_kept(db_url, engine):
    """A page whose claimant stopped renewing its heartbeat (a killed process) is claimed again after
    dead_seconds, long before its lease ends; one whose heartbeat is renewed stays its claimant's."""
    request = build_request(page_size=1)
    with engine.begin() as conn:
        run, _ = runs.start_or_resume_run(conn, request, None)
        page_queue.insert_page(conn, run["id"], "Developers", "", 0, None, "c1", 1)
        page_queue.insert_page(conn, run["id"], "Developers", "", 1, "c1", None, 1)
    with engine.begin() as conn:
        dead = page_queue.claim_page(
            conn, run["id"], "Developers", 600, claimed_by="host-a:1", dead_seconds=45
        )
        live = page_queue.claim_page(
            conn, run["id"], "Developers", 600, claimed_by="host-b:2", dead_seconds=45
        )
    assert (dead.page_no, live.page_no) == (0, 1)
    with engine.begin() as conn:  # host-a died 60 s ago; host-b renews its heartbeat
        conn.execute(
            sa.text(
                "UPDATE chessboard.talent_import_pages SET heartbeat_at = now() - interval '60 seconds'"
                " WHERE id IN (:a, :b)"
            ),
            {"a": dead.id, "b": live.id},
        )
        assert runs.heartbeat(conn, run["id"], "host-b:2", [live.id]) == "Running"
    with engine.begin() as conn:
        again = page_queue.claim_page(
            conn, run["id"], "Developers", 600, claimed_by="host-c:3", dead_seconds=45
        )
        assert (
            page_queue.claim_page(conn, run["id"], "Developers", 600, claimed_by="host-c:3", dead_seconds=45)
            is None
        )
    assert again.id == dead.id and again.claim_token != dead.claim_token
    with engine.connect() as conn:
        claimants = dict(
            conn.execute(
                sa.text("SELECT page_no, claimed_by FROM chessboard.talent_import_pages WHERE run_id = :r"),
                {"r": run["id"]},
            ).all()
        )
        assert not page_queue.hold_claimed_page(conn, dead)  # the dead claim cannot finish the page
    assert claimants == {0: "host-c:3", 1: "host-b:2"}

"""The import orchestration (docs/talent-initial-import.md) against real PostgreSQL and the Talent simulator.

The per-item rules are replica/apply.py's; here a probe apply (import_probe.py) writes to probe
tables in each page transaction, so what is asserted is the orchestration: pages, barriers,
claims, counters, resume, cancellation, the lock.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.talent_import.config import TalentImportConfig
from pin_chessboard_pipelines.defs.talent_import.session import build_session
from pin_chessboard_pipelines.entities import ENTITIES, STAGE_NAMES
from pin_chessboard_pipelines.errors import (
    IMPORT_DISABLED,
    IMPORT_LOCK_HELD,
    IMPORT_SOURCE_UNAVAILABLE,
    Refused,
)
from pin_chessboard_pipelines.settings import load_settings
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.lock import ImportLock
from tests.support.import_probe import (
    FAST,
    SPEC,
    ProbeApply,
    create_probe_tables,
    page_statuses,
    probe_import,
    scalar,
)

# every event written meets its schema (tests/support/contracts.py)
pytestmark = pytest.mark.usefixtures("outbox_contract")


@pytest.fixture
def probe(engine) -> ProbeApply:
    create_probe_tables(engine)
    return ProbeApply()


def _expected_counts(spec: DatasetSpec) -> dict[str, int]:
    return {stage.stage: dataset.count(spec, stage.collection) for stage in ENTITIES}


def test_empty_source_completes_with_nothing_applied_and_again(db_url, engine, talent_sim, probe):
    sim = talent_sim(DatasetSpec(developers=0))
    for _ in range(2):
        result = probe_import(db_url, sim, probe)
        assert result.status == "Completed"
        assert result.totals.planned == result.totals.applied == 0
        # every walk ends with its (empty) first page, Done
        assert page_statuses(engine, result.run_id) == {name: ["Done"] for name in STAGE_NAMES}
    assert scalar(engine, "SELECT count(*) FROM public.import_probe") == 0


def test_a_bootstrap_walks_every_page_once_and_counts_per_stage(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    result = probe_import(db_url, sim, probe, workers=3)
    expected = _expected_counts(SPEC)
    assert result.status == "Completed"
    assert {name: c.planned for name, c in result.stages.items()} == expected
    assert {name: c.applied for name, c in result.stages.items()} == expected
    pages = page_statuses(engine, result.run_id)
    assert {name: len(p) for name, p in pages.items()} == {n: -(-c // 4) for n, c in expected.items()}
    assert all(status == "Done" for p in pages.values() for status in p)
    # every item applied exactly once, and each listing page was read once (the walk's read)
    assert scalar(engine, "SELECT count(*) FROM public.import_probe_log") == sum(expected.values())
    assert scalar(engine, "SELECT count(DISTINCT (entity, talent_id)) FROM public.import_probe_log") == sum(
        expected.values()
    )
    assert sim.page_hits("property-objects", 3) == 1
    # the run row carries the counters summed from the pages
    with engine.connect() as conn:
        run = (
            conn.execute(
                sa.text("SELECT * FROM chessboard.talent_import_runs WHERE id = :r"), {"r": result.run_id}
            )
            .mappings()
            .one()
        )
    assert run["status"] == "Completed" and run["finished_at"] is not None
    assert run["stage_counters"]["PropertyObjects"]["planned"] == expected["PropertyObjects"]
    assert run["page_size"] == 4 and run["mode"] == "ApiPull" and run["dry_run"] is False


def test_stages_are_applied_parent_before_child(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    result = probe_import(db_url, sim, probe, workers=3)
    assert result.status == "Completed"
    with engine.connect() as conn:
        spans = dict(
            (stage, (first, last))
            for stage, first, last in conn.execute(
                sa.text(
                    "SELECT stage, min(applied_at), max(applied_at) FROM public.import_probe_log GROUP BY stage"
                )
            ).all()
        )
    for parent, child in zip(STAGE_NAMES, STAGE_NAMES[1:], strict=False):
        assert spans[parent][1] < spans[child][0], f"{child} started before {parent} was done"


def test_a_duplicate_run_is_a_no_op(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    first = probe_import(db_url, sim, probe)
    second = probe_import(db_url, sim, probe)
    assert first.run_id != second.run_id
    assert second.status == "Completed"
    assert second.totals.applied == 0
    assert second.totals.skipped == second.totals.planned == sum(_expected_counts(SPEC).values())


def test_a_developer_filter_imports_that_developer_only(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    developer = dataset.entity_id(SPEC, "developers", 1)
    result = probe_import(db_url, sim, probe, developer_ids=[developer])
    assert result.status == "Completed"
    assert result.stages["Developers"].planned == 1
    assert result.stages["PropertyObjects"].planned == dataset.count(SPEC, "property-objects", developer)
    with engine.connect() as conn:
        scopes = (
            conn.execute(
                sa.text("SELECT DISTINCT scope FROM chessboard.talent_import_pages WHERE run_id = :r"),
                {"r": result.run_id},
            )
            .scalars()
            .all()
        )
        filters = conn.execute(
            sa.text("SELECT developer_id_filter, scopes FROM chessboard.talent_import_runs WHERE id = :r"),
            {"r": result.run_id},
        ).one()
    assert scopes == [developer]
    assert str(filters[0]) == developer and filters[1] == [developer]


def test_a_project_filter_imports_that_project_only(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    project = dataset.entity_id(SPEC, "projects", 2)
    result = probe_import(db_url, sim, probe, project_id=project)
    assert result.status == "Completed"
    assert result.stages["Developers"].planned == 1  # the project's developer
    assert result.stages["Projects"].planned == 1
    assert result.stages["PropertyObjects"].planned == SPEC.objects_per_project


def test_poison_items_are_counted_failed_and_the_run_completes(db_url, engine, talent_sim):
    create_probe_tables(engine)
    spec = DatasetSpec(objects_per_project=10, poison_every=4)
    sim = talent_sim(spec)
    poison = ProbeApply(
        poison=lambda item: (
            "CHESSBOARD_SYNC_VALIDATION_FAILED"
            if not -5 <= item.get("floor", 0) <= 200 or str(item.get("price", "0")).startswith("-")
            else None
        )
    )
    result = probe_import(db_url, sim, poison)
    assert result.status == "Completed"
    assert result.stages["PropertyObjects"].failed > 0
    assert result.stages["PropertyObjects"].failed + result.stages["PropertyObjects"].applied == 20


def test_dry_run_is_recorded_and_passes_dry_run_to_the_apply_path(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    result = probe_import(db_url, sim, probe, dry_run=True)
    assert result.status == "Completed" and result.dry_run is True
    assert result.totals.applied == sum(_expected_counts(SPEC).values())
    assert probe.dry_runs == probe.calls > 0
    assert scalar(engine, "SELECT count(*) FROM public.import_probe") == 0
    assert scalar(engine, "SELECT dry_run FROM chessboard.talent_import_runs WHERE id = :r", r=result.run_id)


def test_flag_off_refuses_before_writing(db_url, engine, talent_sim):
    sim = talent_sim(SPEC)
    settings = load_settings(
        {
            "CHESSBOARD_TALENT_SYNC_ENABLED": "false",
            "CHESSBOARD_DATABASE_URL": db_url,
            "TALENT_API_URL": sim.url,
        }
    )
    with pytest.raises(Refused) as refused:
        build_session(
            settings,
            db_url,
            TalentImportConfig(),
            correlation_id=str(uuid.uuid4()),
            developer_ids=[],
            dagster_run_id=None,
        ).open()
    assert refused.value.code == IMPORT_DISABLED
    assert scalar(engine, "SELECT count(*) FROM chessboard.talent_import_runs") == 0


def test_an_unavailable_source_is_refused_before_writing(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    sim.available = False
    with pytest.raises(Refused) as refused:
        probe_import(db_url, sim, probe)
    assert refused.value.code == IMPORT_SOURCE_UNAVAILABLE
    assert refused.value.line() == "CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: GET /health answered 503"
    assert scalar(engine, "SELECT count(*) FROM chessboard.talent_import_runs") == 0


def test_the_advisory_lock_refuses_a_second_import(db_url, engine, talent_sim, probe):
    sim = talent_sim(SPEC)
    with ImportLock(db_url) as other:
        other.acquire(timeout=0)
        started = time.monotonic()
        with pytest.raises(Refused) as refused:
            probe_import(db_url, sim, probe)
        assert time.monotonic() - started >= FAST.lock_timeout_seconds
    assert refused.value.code == IMPORT_LOCK_HELD
    assert "pid" in str(refused.value)
    assert scalar(engine, "SELECT count(*) FROM chessboard.talent_import_runs") == 0
    # released by the holder: the next import runs
    assert probe_import(db_url, sim, probe).status == "Completed"


def test_the_lock_is_released_after_a_run(db_url, talent_sim, probe):
    sim = talent_sim(SPEC)
    probe_import(db_url, sim, probe)
    with ImportLock(db_url) as lock:
        lock.acquire(timeout=0)
        assert lock.held


def test_cancellation_stops_after_the_current_page(db_url, engine, talent_sim):
    create_probe_tables(engine)
    sim = talent_sim(SPEC)
    stop, in_flight, release = threading.Event(), threading.Event(), threading.Event()

    def hold_first_object_page(entity, items):
        if entity == "propertyObject" and not in_flight.is_set():
            in_flight.set()
            assert release.wait(10)

    apply = ProbeApply(before_apply=hold_first_object_page)
    outcome: dict = {}
    thread = threading.Thread(
        target=lambda: outcome.setdefault(
            "result", probe_import(db_url, sim, apply, workers=1, should_stop=stop.is_set)
        )
    )
    thread.start()
    assert in_flight.wait(20)
    stop.set()
    release.set()
    thread.join(20)
    result = outcome["result"]
    assert result.status == "Cancelled"
    pages = page_statuses(engine, result.run_id)
    assert pages["PropertyObjects"][0] == "Done"  # the page in flight was finished
    assert "Pending" in pages["PropertyObjects"]  # nothing after it
    assert set(pages["Layouts"]) == {"Done"}  # earlier stages kept
    with ImportLock(db_url) as lock:
        lock.acquire(timeout=0)
    # the same import again resumes the cancelled run: the Done pages stay, the rest is applied
    resumed = probe_import(db_url, sim, apply)
    assert resumed.run_id == result.run_id and resumed.status == "Completed"
    assert scalar(engine, "SELECT count(*) FROM public.import_probe_log") == sum(
        _expected_counts(SPEC).values()
    )

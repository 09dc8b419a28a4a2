"""The import's test table (docs/talent-initial-import.md) with the real apply path: what a
bootstrap leaves in the replica, the quarantine, the outbox and the recalc queue (docs/talent-source.md,
docs/store.md)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource
from tests.support.import_probe import CLIENT, FAST
from tests.support.metrics import sample_value
from tests.support.polling import wait_until

# every event written meets its schema (tests/support/contracts.py)
pytestmark = pytest.mark.usefixtures("outbox_contract")

REPLICA = ("developers", "projects", "buildings", "layout_groups", "layouts", "property_objects")
COLLECTION_OF = dict(zip(REPLICA, COLLECTIONS, strict=True))
PROJECT_EVENT_FIELDS = {
    "id", "tenantId", "developerId", "status", "name", "type", "class", "constructionStatus",
    "countryId", "countrySnapshot", "regionId", "regionSnapshot", "cityId", "citySnapshot", "stars",
    "hotelierId", "price", "currencyId", "currencySnapshot", "propertyObjectsTotalCount",
    "propertyObjectsFreeCount", "paybackYears", "coverImageFileId", "version",
}  # fmt: skip
SPEC = DatasetSpec(developers=2, projects_per_developer=2, buildings_per_project=2, objects_per_project=12)


def _import(db_url, sim, **request):
    request.setdefault("page_size", 5)
    request.setdefault("workers", 2)
    return ImportSession(
        db_url, build_request(**request), ApiPullSource(sim.url, client_options=CLIENT), options=FAST
    ).run_here()


def _count(engine, table: str, where: str = "true") -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM chessboard.{table} WHERE {where}")).scalar()


def _fingerprint(engine) -> dict[str, str]:
    """An md5 of every replica table's rows, the outbox and the recalc queue."""
    with engine.connect() as conn:
        prints = {
            table: conn.execute(
                sa.text(f"SELECT md5(string_agg(t::text, '|' ORDER BY t.id)) FROM chessboard.{table} AS t")
            ).scalar()
            for table in REPLICA
        }
        prints["outbox"] = str(
            conn.execute(sa.text("SELECT count(*) FROM chessboard.outbox_messages")).scalar()
        )
        prints["recalc"] = conn.execute(
            sa.text(
                "SELECT string_agg(project_id::text || ':' || requested_count, ',' ORDER BY project_id)"
                " FROM chessboard.project_recalc_requests"
            )
        ).scalar()
    return prints


def _metric(url: str, name: str, labels: dict[str, str] | None = None) -> float:
    return sample_value(url, name, **(labels or {}))


def test_an_empty_source_completes_and_writes_nothing(db_url, engine, talent_sim):
    sim = talent_sim(DatasetSpec(developers=0))
    for _ in range(2):
        result = _import(db_url, sim)
        assert result.status == "Completed" and result.totals.planned == 0
    assert all(_count(engine, t) == 0 for t in (*REPLICA, "outbox_messages", "talent_import_failed_items"))


def test_parents_are_in_the_replica_before_their_children(db_url, engine, talent_sim):
    sim = talent_sim(SPEC)
    result = _import(db_url, sim, workers=3)
    assert result.status == "Completed"
    assert _count(engine, "talent_import_failed_items") == 0  # no CHESSBOARD_SYNC_PARENT_NOT_FOUND
    for table in REPLICA:
        assert _count(engine, table) == dataset.count(SPEC, COLLECTION_OF[table]), table
        assert result.stages[table.title().replace("_", "")].applied == _count(engine, table)
    assert _count(engine, "developers", "status = 'Draft'") == 2
    assert _count(engine, "projects", "status = 'Draft' AND sync_source = 'TalentChessboard'") == 4
    assert _count(engine, "property_objects", "status_source = 'TalentSync' AND replica_version >= 1") == 48
    # one debounced recalc request per touched project, reason TalentSync
    assert _count(engine, "project_recalc_requests", "last_reason = 'TalentSync'") == 4


def test_the_outbox_holds_the_events_the_streaming_sync_would_emit(db_url, engine, talent_sim):
    sim = talent_sim(SPEC)
    result = _import(db_url, sim)
    assert result.status == "Completed"
    with engine.connect() as conn:
        topics = dict(
            conn.execute(
                sa.text("SELECT topic, count(*) FROM chessboard.outbox_messages GROUP BY topic")
            ).all()
        )
        project = conn.execute(
            sa.text(
                "SELECT payload, headers FROM chessboard.outbox_messages"
                " WHERE topic = 'pin.chessboard.project-upserted.v1' LIMIT 1"
            )
        ).one()
        priced = conn.execute(
            sa.text("SELECT count(*) FROM chessboard.property_objects WHERE price IS NOT NULL")
        ).scalar()
        sold = conn.execute(
            sa.text("SELECT count(*) FROM chessboard.property_objects WHERE status = 'Sold'")
        ).scalar()
    assert topics["pin.chessboard.developer-upserted.v1"] == 2
    assert topics["pin.chessboard.project-upserted.v1"] == 4
    assert topics["pin.chessboard.property-object-upserted.v1"] == 48
    assert topics["pin.chessboard.property-object-price-changed.v1"] == priced
    assert topics.get("pin.chessboard.property-object-status-changed.v1", 0) == sold
    payload, headers = project
    assert set(payload) == PROJECT_EVENT_FIELDS
    assert payload["countrySnapshot"]["id"] == payload["countryId"]
    assert payload["currencySnapshot"]["isoCode"] == "RUB"
    assert headers["correlationId"] == result.correlation_id


def test_a_duplicate_run_changes_nothing(db_url, engine, talent_sim):
    sim = talent_sim(SPEC)
    first = _import(db_url, sim)
    before = _fingerprint(engine)
    second = _import(db_url, sim)
    assert second.status == "Completed"
    assert second.totals.applied == 0 and second.totals.skipped == first.totals.applied
    assert _fingerprint(engine) == before


def test_poison_items_are_quarantined_and_the_run_completes(db_url, engine, talent_sim):
    spec = DatasetSpec(**{**SPEC.__dict__, "poison_every": 5})
    sim = talent_sim(spec)
    failed_before = _metric(db_url, "chessboard_import_failed_items_total")
    result = _import(db_url, sim)
    assert result.status == "Completed"
    poison = sum(1 for i in range(48) if dataset.poison_kind(spec, i))
    assert result.stages["PropertyObjects"].failed == poison > 0
    assert result.stages["PropertyObjects"].applied == 48 - poison
    with engine.connect() as conn:
        rows = (
            conn.execute(
                sa.text(
                    "SELECT stage, external_id, error_code, payload FROM chessboard.talent_import_failed_items WHERE run_id = :r"
                ),
                {"r": result.run_id},
            )
            .mappings()
            .all()
        )
    assert len(rows) == poison
    assert {r["stage"] for r in rows} == {"PropertyObjects"}
    assert all(
        r["error_code"].startswith("CHESSBOARD_SYNC_") and r["payload"]["id"] == r["external_id"]
        for r in rows
    )
    assert _metric(db_url, "chessboard_import_failed_items_total") - failed_before == poison
    # seen again in a later run: quarantined again, counted failed (not skipped)
    again = _import(db_url, sim)
    assert again.stages["PropertyObjects"].failed == poison and again.stages["PropertyObjects"].applied == 0


def _analyzed(engine) -> dict[str, tuple[int, float]]:
    """(manual ANALYZE count, planner's row estimate) of the tables an import fills."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT s.relname, s.analyze_count, c.reltuples FROM pg_stat_user_tables AS s"
                " JOIN pg_class AS c ON c.oid = s.relid"
                " WHERE s.schemaname = 'chessboard' AND s.relname = ANY(:tables)"
            ),
            {"tables": list(FILLED)},
        ).all()
    return {name: (int(count), float(tuples)) for name, count, tuples in rows}


FILLED = (*REPLICA, "project_recalc_requests", "outbox_messages")


def test_a_run_leaves_planner_statistics_of_the_tables_it_filled(db_url, engine, talent_sim):
    # a bulk load leaves the planner's estimates as before it: the recalc's plans scanned a whole index
    sim = talent_sim(SPEC)
    before = _analyzed(engine)
    result = _import(db_url, sim)
    assert result.status == "Completed"

    def analyzed():
        now = _analyzed(engine)
        return now if all(now[t][0] > before.get(t, (0, 0.0))[0] for t in FILLED) else None

    after = wait_until(analyzed, timeout=10, what="an ANALYZE of every table the import filled")
    # the estimates are the rows the run left (each table is small enough to be read whole)
    for table in FILLED:
        assert after[table][1] == _count(engine, table), table


def test_a_dry_run_writes_nothing_and_counts_what_a_real_run_would_do(db_url, engine, talent_sim):
    spec = DatasetSpec(**{**SPEC.__dict__, "poison_every": 7})
    sim = talent_sim(spec)
    dry = _import(db_url, sim, dry_run=True)
    assert dry.status == "Completed" and dry.dry_run
    for table in (*REPLICA, "outbox_messages", "talent_import_failed_items", "project_recalc_requests"):
        assert _count(engine, table) == 0, table
    assert _count(engine, "talent_import_runs", "dry_run") == 1
    assert _count(engine, "talent_import_pages", "status = 'Done'") > 0
    real = _import(db_url, sim)
    assert {n: c.to_dict() for n, c in dry.stages.items()} == {n: c.to_dict() for n, c in real.stages.items()}


def test_unknown_enum_values_take_the_fallback_and_are_counted(db_url, engine, talent_sim):
    spec = DatasetSpec(**{**SPEC.__dict__, "unknown_enum_every": 2})
    sim = talent_sim(spec)
    status_before = _metric(
        db_url, "chessboard_sync_unknown_enum_total", {"enum": "propertyObject.status", "value": "Frozen"}
    )
    result = _import(db_url, sim)
    assert result.status == "Completed" and result.totals.failed == 0
    frozen = sum(1 for i in range(48) if dataset.unknown_enum_field(spec, "property-objects", i))
    assert _count(engine, "property_objects", "status = 'Hidden'") >= frozen > 0
    after = _metric(
        db_url, "chessboard_sync_unknown_enum_total", {"enum": "propertyObject.status", "value": "Frozen"}
    )
    assert after - status_before == frozen
    with engine.connect() as conn:
        types = set(conn.execute(sa.text("SELECT type FROM chessboard.projects")).scalars())
    assert types <= {"ResidentialComplex", "ApartHotel", "Hotel", "Villa"}


@pytest.mark.parametrize("workers", [1, 4])
def test_the_result_does_not_depend_on_the_number_of_workers(db_url, engine, talent_sim, workers):
    sim = talent_sim(SPEC)
    result = _import(db_url, sim, workers=workers, page_size=3)
    assert result.status == "Completed"
    assert result.stages["PropertyObjects"].applied == 48
    assert _count(engine, "property_objects") == 48

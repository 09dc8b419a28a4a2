"""Builders and readers for the replica apply tests: contexts, a hand-built Talent tree, store reads."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from pin_chessboard_pipelines.entities import ENTITIES, pin_id
from pin_chessboard_pipelines.replica.apply import ApplyContext, ApplyResult, apply_snapshots
from pin_chessboard_pipelines.store.handbook_replica import load_handbook
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

RUN_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")


ENTITY_TABLES = {e.name: e.table for e in ENTITIES}


WRITTEN_TABLES = (
    *ENTITY_TABLES.values(),
    "talent_import_failed_items",
    "outbox_messages",
    "project_recalc_requests",
)


def tid() -> str:
    return str(uuid.uuid4())


def context_factory(engine):
    """make(**overrides) -> an ApplyContext of a test import run, with the store's handbook."""
    with engine.connect() as conn:
        handbook = load_handbook(conn)

    def make(**overrides) -> ApplyContext:
        values = {
            "correlation_id": "corr-1",
            "handbook": handbook,
            "debounce_seconds": 30,
            "cap_seconds": 300,
            "run_id": RUN_ID,
        }
        values.update(overrides)
        return ApplyContext(**values)

    return make


def apply(engine, entity, items, ctx) -> ApplyResult:
    with engine.begin() as conn:
        return apply_snapshots(conn, entity, items, ctx)


def rows(engine, sql, **params) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def one(engine, sql, **params) -> dict:
    (row,) = rows(engine, sql, **params)
    return row


def counts(engine) -> dict[str, int]:
    return {t: one(engine, f"SELECT count(*) AS n FROM chessboard.{t}")["n"] for t in WRITTEN_TABLES}


def outbox(engine, topic_part: str = "") -> list[dict]:
    return rows(
        engine,
        "SELECT topic, message_key, payload, headers FROM chessboard.outbox_messages "
        "WHERE topic LIKE :t ORDER BY id",
        t=f"%{topic_part}%",
    )


class Tree:
    """A hand-built Talent hierarchy: one developer, project, building, layout group and layout."""

    def __init__(self) -> None:
        self.developer = {"id": tid(), "version": 1, "name": "ГК Север", "inn": "7701234567"}
        self.project = {
            "id": tid(),
            "developerId": self.developer["id"],
            "version": 3,
            "name": "ЖК Северный",
            "type": "ApartHotel",
            "class": "Business",
            "constructionStatus": "Commissioned",
            "countryId": 643,
            "regionId": 77,
            "cityId": 1,
            "stars": 4,
            "currencyId": 643,
            "paybackYears": "7.5",
            "unknownExtra": {"ignored": True},
        }
        self.building = {
            "id": tid(),
            "projectId": self.project["id"],
            "version": 2,
            "name": "Корпус 1",
            "floorsCount": 17,
        }
        self.group = {
            "id": tid(),
            "projectId": self.project["id"],
            "version": 1,
            "name": "Студии",
            "rooms": 0,
        }
        self.layout = {
            "id": tid(),
            "projectId": self.project["id"],
            "layoutGroupId": self.group["id"],
            "version": 1,
            "name": "Студия 24.5 м²",
            "rooms": 0,
            "totalArea": 24.5,
        }

    def obj(self, number: str, status: str = "Free", price: str | None = "5000000.50", **extra) -> dict:
        item = {
            "id": tid(),
            "buildingId": self.building["id"],
            "layoutId": self.layout["id"],
            "version": 1,
            "number": number,
            "floor": 3,
            "section": 1,
            "status": status,
            "price": price,
            "totalArea": "24.50",
        }
        item.update(extra)
        return item

    def apply_parents(self, engine, ctx, with_developer: bool = True) -> None:
        for entity, item in (
            ("developer", self.developer),
            ("project", self.project),
            ("building", self.building),
            ("layoutGroup", self.group),
            ("layout", self.layout),
        )[0 if with_developer else 1 :]:
            result = apply(engine, entity, [item], ctx)
            assert (result.applied, result.failed) == (1, 0), (entity, result)


def pid(entity: str, item: dict) -> uuid.UUID:
    return pin_id(entity, item["id"])


def stage_items(spec: DatasetSpec) -> list[tuple[str, list[dict]]]:
    return [(stage.name, list(dataset.iter_items(spec, stage.collection))) for stage in ENTITIES]


def apply_in_pages(engine, ctx, stages, page_size=7) -> dict[str, tuple[int, int, int, int]]:
    totals = {}
    for entity, items in stages:
        planned = applied = skipped = failed = 0
        for start in range(0, len(items), page_size):
            result = apply(engine, entity, items[start : start + page_size], ctx)
            planned += result.planned
            applied += result.applied
            skipped += result.skipped
            failed += result.failed
        totals[entity] = (planned, applied, skipped, failed)
    return totals


REPLICA_STATE_SQL = {
    table: f"SELECT * FROM chessboard.{table} ORDER BY id" for table in ENTITY_TABLES.values()
}


VOLATILE_COLUMNS = ("created_at", "updated_at", "last_synced_at")


def replica_state(engine) -> dict:
    state = {
        table: [{k: v for k, v in r.items() if k not in VOLATILE_COLUMNS} for r in rows(engine, sql)]
        for table, sql in REPLICA_STATE_SQL.items()
    }
    state["events"] = [
        (e["topic"], e["message_key"], e["payload"])
        for e in rows(
            engine, "SELECT topic, message_key, payload FROM chessboard.outbox_messages ORDER BY id"
        )
    ]
    state["quarantine"] = rows(
        engine,
        "SELECT stage, external_id, error_code, error_message, payload "
        "FROM chessboard.talent_import_failed_items ORDER BY id",
    )
    state["recalc"] = rows(
        engine, "SELECT project_id, tenant_id FROM chessboard.project_recalc_requests ORDER BY 1"
    )
    return state


def refuse_developer(conn, talent_id: str) -> None:
    """A trigger that makes the store refuse (raise on) every write of the developer `talent_id`:
    that one message fails on its own, the others of its batch apply."""
    conn.execute(
        sa.text(
            "CREATE FUNCTION chessboard.refuse_one_developer() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN IF NEW.external_talent_id = '{talent_id}' THEN RAISE EXCEPTION 'developer {talent_id} refused'; "
            "END IF; RETURN NEW; END $$"
        )
    )
    conn.execute(
        sa.text(
            "CREATE TRIGGER refuse_one_developer BEFORE INSERT OR UPDATE ON chessboard.developers "
            "FOR EACH ROW EXECUTE FUNCTION chessboard.refuse_one_developer()"
        )
    )

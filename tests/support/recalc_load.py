"""N dirty projects loaded set-based (fresh replica rows, every aggregate to write and publish, a
due recalc row each): the recalc benchmarks' and the multi-drain tests' workload."""

from __future__ import annotations

import time

import sqlalchemy as sa

BUILDINGS, GROUPS, LAYOUTS = 2, 2, 5

LOAD_SQL = """
INSERT INTO chessboard.developers (id, external_talent_id, replica_version, name)
SELECT md5(:tag || 'd' || d)::uuid, md5(:tag || 'dx' || d)::uuid, 1, 'Developer ' || d
FROM generate_series(1, :developers) d;

INSERT INTO chessboard.projects (id, external_talent_id, replica_version, tenant_id, developer_id, name,
    type, class, construction_status, country_id, region_id, city_id, currency_id)
SELECT md5(:tag || 'p' || p)::uuid, md5(:tag || 'px' || p)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'd' || (p % :developers + 1))::uuid,
       'Project ' || p, 'ResidentialComplex', 'Comfort', 'UnderConstruction', 643, 77, 1, 643
FROM generate_series(1, :projects) p;

INSERT INTO chessboard.buildings (id, external_talent_id, replica_version, tenant_id, project_id, name,
    floors_count)
SELECT md5(:tag || 'b' || p || '-' || b)::uuid, md5(:tag || 'bx' || p || '-' || b)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid, 'B' || b, 20
FROM generate_series(1, :projects) p, generate_series(0, :buildings - 1) b;

INSERT INTO chessboard.layout_groups (id, external_talent_id, replica_version, tenant_id, project_id, name,
    rooms)
SELECT md5(:tag || 'g' || p || '-' || g)::uuid, md5(:tag || 'gx' || p || '-' || g)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid, 'G' || g, g
FROM generate_series(1, :projects) p, generate_series(0, :groups - 1) g;

INSERT INTO chessboard.layouts (id, external_talent_id, replica_version, tenant_id, project_id,
    layout_group_id, name, rooms, total_area)
SELECT md5(:tag || 'l' || p || '-' || l)::uuid, md5(:tag || 'lx' || p || '-' || l)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid,
       md5(:tag || 'g' || p || '-' || (l % :groups))::uuid, 'L' || l, l % 4, 25 + l * 7.5
FROM generate_series(1, :projects) p, generate_series(0, :layouts - 1) l;

INSERT INTO chessboard.property_objects (id, external_talent_id, replica_version, tenant_id, project_id,
    building_id, layout_id, number, floor, status, price, total_area)
SELECT md5(:tag || 'o' || p || '-' || k)::uuid, md5(:tag || 'ox' || p || '-' || k)::uuid, 1,
       md5(:tag || 'd' || (p % :developers + 1))::uuid, md5(:tag || 'p' || p)::uuid,
       md5(:tag || 'b' || p || '-' || (k % :buildings))::uuid,
       CASE WHEN k % (:layouts + 1) = :layouts THEN NULL
            ELSE md5(:tag || 'l' || p || '-' || (k % (:layouts + 1)))::uuid END,
       k::text, k % 20,
       (ARRAY['Free', 'Free', 'Free', 'Reserved', 'Booked', 'Sold', 'Sold', 'Hidden'])[1 + (k * 7 + p) % 8],
       round((3000000 + ((k * 7919 + p * 104729) % 9000000))::numeric, 2), 40
FROM generate_series(1, :projects) p, generate_series(1, :objects) k;

INSERT INTO chessboard.project_recalc_requests (project_id, tenant_id, due_at, first_requested_at,
    requested_count, last_reason)
SELECT md5(:tag || 'p' || p)::uuid, md5(:tag || 'd' || (p % :developers + 1))::uuid, now(), now(), 1,
       'TalentSync'
FROM generate_series(1, :projects) p;
"""


def load(engine: sa.Engine, tag: str, projects: int, objects: int) -> float:
    started = time.perf_counter()
    params = {
        "tag": tag,
        "projects": projects,
        "objects": objects,
        "developers": max(1, projects // 100),
        "buildings": BUILDINGS,
        "groups": GROUPS,
        "layouts": LAYOUTS,
    }
    with engine.begin() as conn:
        for statement in LOAD_SQL.split(";"):
            if statement.strip():
                conn.execute(sa.text(statement), params)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    return time.perf_counter() - started

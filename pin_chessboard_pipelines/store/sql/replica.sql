-- The replica apply path (replica/apply.py): one statement per step and batch, never one per row.
-- Run through queries("replica") on a raw cursor in the caller's transaction
-- (store/cursor.py). Arrays arrive one per column (`unnest ... WITH ORDINALITY`, rows kept in batch
-- order: the live-number index is checked row by row, so the order of a batch is the order of application).
-- `{table}`, `{columns}`: identifiers of entities.py, never user input, quoted by the driver (with_identifiers).

-- name: existing_rows
-- Current rows of a batch's Talent ids (version guard, old price/status, live numbers); {columns}
-- are the ones the apply path reads (replica/entities.py `existing_columns`).
SELECT {columns}
FROM chessboard.{table}
WHERE external_talent_id = ANY(CAST(:ids AS uuid[]))

-- name: parent_rows
-- Parents of a batch by PIN id: existence (soft-deleted counts), project and tenant of the child.
SELECT *
FROM chessboard.{table}
WHERE id = ANY(CAST(:ids AS uuid[]))

-- name: live_number_holders
-- Live property objects holding one of the (building, number) pairs a batch wants. One index probe
-- per pair (LATERAL ... LIMIT 1; the live-number index holds at most one row per pair): a plain
-- join is planned as a full scan + sort while the table's statistics still describe the empty
-- table of an import's start (144 ms instead of 0.8 ms per page at 500k rows).
SELECT k.building_id, k.number, po.external_talent_id
FROM unnest(CAST(:building_ids AS uuid[]), CAST(:numbers AS text[])) AS k(building_id, number)
CROSS JOIN LATERAL (
    SELECT p.external_talent_id
    FROM chessboard.property_objects AS p
    WHERE p.building_id = k.building_id AND p.number = k.number AND p.deleted_at IS NULL
    LIMIT 1
) AS po

-- name: tombstone_rows
-- A tombstone soft-deletes an alive row; a missing or already deleted one is left alone.
UPDATE chessboard.{table} AS t
SET deleted_at = now(), version = t.version + 1, updated_at = now(), last_synced_at = now()
WHERE t.external_talent_id = ANY(CAST(:ids AS uuid[])) AND t.deleted_at IS NULL
RETURNING t.*

-- name: tombstones
-- The deletes of a batch's Talent ids read from the topics (docs/talent-source.md#deletes): where
-- each one was read.
SELECT external_talent_id, source_partition, source_offset
FROM chessboard.talent_tombstones
WHERE entity = :entity AND external_talent_id = ANY(CAST(:ids AS uuid[]))

-- name: record_tombstones
-- A tombstone's position, kept for the key whether or not the replica holds a row of it; a later
-- tombstone of the key replaces an earlier one, never the other way round (ids unique per call).
INSERT INTO chessboard.talent_tombstones AS t (entity, external_talent_id, source_partition, source_offset)
SELECT :entity, u.external_talent_id, u.source_partition, u.source_offset
FROM unnest(CAST(:ids AS uuid[]), CAST(:partitions AS int[]), CAST(:offsets AS bigint[]))
     AS u(external_talent_id, source_partition, source_offset)
ON CONFLICT (entity, external_talent_id) DO UPDATE SET
    source_partition = EXCLUDED.source_partition,
    source_offset = EXCLUDED.source_offset,
    deleted_at = now()
WHERE t.source_partition IS DISTINCT FROM EXCLUDED.source_partition
   OR t.source_offset < EXCLUDED.source_offset

-- name: forget_tombstones
-- A snapshot read after the delete re-created the entity: from now on its version guards it.
DELETE FROM chessboard.talent_tombstones
WHERE entity = :entity AND external_talent_id = ANY(CAST(:ids AS uuid[]))

-- name: tombstone_projects
-- A project's tombstone archives it as a snapshot with deletedAt does (docs/store.md).
UPDATE chessboard.projects AS t
SET deleted_at = now(), status = 'Archived', version = t.version + 1, updated_at = now(),
    last_synced_at = now()
WHERE t.external_talent_id = ANY(CAST(:ids AS uuid[])) AND t.deleted_at IS NULL
RETURNING t.*

-- name: carry_building_objects
-- A moved building carries its property objects (docs/store.md#moves): every object of the building,
-- alive or deleted, takes the building's new project and tenant, version + 1, in the building's
-- transaction. One statement for all the batch's moved buildings; the rows go out as
-- property-object-upserted events.
UPDATE chessboard.property_objects AS o
SET project_id = m.project_id, tenant_id = m.tenant_id, version = o.version + 1, updated_at = now()
FROM unnest(CAST(:building_ids AS uuid[]), CAST(:project_ids AS uuid[]), CAST(:tenant_ids AS uuid[]))
     AS m(building_id, project_id, tenant_id)
WHERE o.building_id = m.building_id
  AND (o.project_id, o.tenant_id) IS DISTINCT FROM (m.project_id, m.tenant_id)
RETURNING o.*

-- name: left_behind_projects
-- Runbook "carry left-behind objects": (old project, old tenant, building's project, its tenant) of
-- the objects whose project is not their building's (building moves applied before moves carried
-- objects, docs/store.md#moves).
SELECT DISTINCT o.project_id AS old_project_id, o.tenant_id AS old_tenant_id,
       b.project_id, b.tenant_id
FROM chessboard.property_objects AS o
JOIN chessboard.buildings AS b ON b.id = o.building_id
WHERE (o.project_id, o.tenant_id) IS DISTINCT FROM (b.project_id, b.tenant_id)

-- name: carry_left_behind_objects
-- The same objects take their building's project and tenant, version + 1 (published by the caller).
UPDATE chessboard.property_objects AS o
SET project_id = b.project_id, tenant_id = b.tenant_id, version = o.version + 1, updated_at = now()
FROM chessboard.buildings AS b
WHERE b.id = o.building_id
  AND (o.project_id, o.tenant_id) IS DISTINCT FROM (b.project_id, b.tenant_id)
RETURNING o.*

-- name: rows_by_id
-- Rows of a table by PIN id: the projects of the layouts / layout groups a change links to.
SELECT id, project_id, tenant_id
FROM chessboard.{table}
WHERE id = ANY(CAST(:ids AS uuid[]))

-- name: insert_failed_items
-- One row per run and message read from a topic: a batch read again (a crash before its offsets
-- were committed) quarantines nothing twice; `ord` of the rows written comes back. Items of no
-- topic (ApiPull, NULL source) are always written.
INSERT INTO chessboard.talent_import_failed_items
    (run_id, stage, external_id, error_code, error_message, payload, source_topic, source_partition,
     source_offset)
SELECT CAST(:run_id AS uuid), :stage, u.external_id, u.error_code, u.error_message, u.payload::jsonb,
       u.source_topic, u.source_partition, u.source_offset
FROM unnest(CAST(:external_ids AS text[]), CAST(:error_codes AS text[]), CAST(:error_messages AS text[]),
            CAST(:payloads AS text[]), CAST(:source_topics AS text[]), CAST(:source_partitions AS int[]),
            CAST(:source_offsets AS bigint[]))
     WITH ORDINALITY AS u(external_id, error_code, error_message, payload, source_topic,
                          source_partition, source_offset, ord)
ORDER BY u.ord
ON CONFLICT (run_id, source_topic, source_partition, source_offset) DO NOTHING
RETURNING source_topic, source_partition, source_offset

-- name: take_waiting_items
-- A replayed dead letter's entity is there now: the items the streaming sync quarantined only
-- because it was missing (CHESSBOARD_SYNC_PARENT_NOT_FOUND; `field` is the snapshot field naming
-- the parent's Talent id) leave the quarantine, to be applied in the same transaction.
DELETE FROM chessboard.talent_import_failed_items
WHERE run_id = CAST(:run_id AS uuid) AND stage = :stage AND error_code = :code
  AND lower(payload->>:field) = ANY(CAST(:ids AS text[]))
RETURNING id, payload::text AS payload, source_topic, source_partition, source_offset

-- Upserts: create from the snapshot (version 1, Draft for developer/project/building, counters 0,
-- bounds NULL by the column defaults) or overwrite ONLY the replica fields under the version guard;
-- PIN-owned fields (status of developer/project/building, hotelier_id, cover_image_file_id,
-- aggregates, created_at) are never in a SET list. `inserted` tells a create from a change.
-- A newer snapshot whose mapped fields equal the stored ones moves replica_version and
-- last_synced_at only: version and updated_at stay, so the caller publishes nothing
-- (docs/store.md#replica-tables).

-- name: upsert_developers
INSERT INTO chessboard.developers AS t
    (id, external_talent_id, sync_source, replica_version, last_synced_at, version, deleted_at,
     name, inn, status)
SELECT u.id, u.external_talent_id, 'TalentChessboard', u.replica_version, now(), 1, u.deleted_at,
       u.name, u.inn, 'Draft'
FROM unnest(CAST(:id AS uuid[]), CAST(:external_talent_id AS uuid[]), CAST(:replica_version AS bigint[]),
            CAST(:deleted_at AS timestamptz[]), CAST(:name AS text[]), CAST(:inn AS text[]))
     WITH ORDINALITY AS u(id, external_talent_id, replica_version, deleted_at, name, inn, ord)
ORDER BY u.ord
ON CONFLICT (external_talent_id) DO UPDATE SET
    name = EXCLUDED.name,
    inn = EXCLUDED.inn,
    deleted_at = EXCLUDED.deleted_at,
    sync_source = EXCLUDED.sync_source,
    replica_version = EXCLUDED.replica_version,
    last_synced_at = now(),
    updated_at = CASE WHEN ROW(t.name, t.inn, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.name, EXCLUDED.inn, EXCLUDED.deleted_at) THEN now() ELSE t.updated_at END,
    version = t.version + CASE WHEN ROW(t.name, t.inn, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.name, EXCLUDED.inn, EXCLUDED.deleted_at) THEN 1 ELSE 0 END
WHERE t.replica_version < EXCLUDED.replica_version
RETURNING t.*, (t.xmax = 0) AS inserted

-- name: upsert_projects
-- tenant_id / developer_id are set at create only (a project's owner never changes: the apply path
-- quarantines a snapshot with another developer, CHESSBOARD_SYNC_IMMUTABLE_CHANGED; the guard
-- below keeps a concurrent one from overwriting anything). A snapshot with deletedAt archives the
-- project: status 'Archived' with the soft delete, so its event says so (docs/store.md).
INSERT INTO chessboard.projects AS t
    (id, external_talent_id, sync_source, replica_version, last_synced_at, version, deleted_at,
     tenant_id, developer_id, status, name, type, class, construction_status, country_id,
     region_id, city_id, stars, currency_id, payback_years)
SELECT u.id, u.external_talent_id, 'TalentChessboard', u.replica_version, now(), 1, u.deleted_at,
       u.tenant_id, u.developer_id,
       CASE WHEN u.deleted_at IS NULL THEN 'Draft' ELSE 'Archived' END,
       u.name, u.type, u.class, u.construction_status,
       u.country_id, u.region_id, u.city_id, u.stars, u.currency_id, u.payback_years
FROM unnest(CAST(:id AS uuid[]), CAST(:external_talent_id AS uuid[]), CAST(:replica_version AS bigint[]),
            CAST(:deleted_at AS timestamptz[]), CAST(:tenant_id AS uuid[]), CAST(:developer_id AS uuid[]),
            CAST(:name AS text[]), CAST(:type AS text[]), CAST(:class AS text[]), CAST(:construction_status AS text[]),
            CAST(:country_id AS smallint[]), CAST(:region_id AS bigint[]), CAST(:city_id AS bigint[]),
            CAST(:stars AS smallint[]), CAST(:currency_id AS smallint[]), CAST(:payback_years AS numeric[]))
     WITH ORDINALITY AS u(id, external_talent_id, replica_version, deleted_at, tenant_id,
                          developer_id, name, type, class, construction_status, country_id,
                          region_id, city_id, stars, currency_id, payback_years, ord)
ORDER BY u.ord
ON CONFLICT (external_talent_id) DO UPDATE SET
    name = EXCLUDED.name,
    type = EXCLUDED.type,
    class = EXCLUDED.class,
    construction_status = EXCLUDED.construction_status,
    country_id = EXCLUDED.country_id,
    region_id = EXCLUDED.region_id,
    city_id = EXCLUDED.city_id,
    stars = EXCLUDED.stars,
    currency_id = EXCLUDED.currency_id,
    payback_years = EXCLUDED.payback_years,
    deleted_at = EXCLUDED.deleted_at,
    -- Archived stays Archived (* -> Archived is the last transition); a delete archives
    status = CASE WHEN EXCLUDED.deleted_at IS NOT NULL THEN 'Archived' ELSE t.status END,
    sync_source = EXCLUDED.sync_source,
    replica_version = EXCLUDED.replica_version,
    last_synced_at = now(),
    updated_at = CASE WHEN ROW(t.name, t.type, t.class, t.construction_status, t.country_id, t.region_id, t.city_id, t.stars, t.currency_id, t.payback_years, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.name, EXCLUDED.type, EXCLUDED.class, EXCLUDED.construction_status, EXCLUDED.country_id, EXCLUDED.region_id, EXCLUDED.city_id, EXCLUDED.stars, EXCLUDED.currency_id, EXCLUDED.payback_years, EXCLUDED.deleted_at) THEN now() ELSE t.updated_at END,
    version = t.version + CASE WHEN ROW(t.name, t.type, t.class, t.construction_status, t.country_id, t.region_id, t.city_id, t.stars, t.currency_id, t.payback_years, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.name, EXCLUDED.type, EXCLUDED.class, EXCLUDED.construction_status, EXCLUDED.country_id, EXCLUDED.region_id, EXCLUDED.city_id, EXCLUDED.stars, EXCLUDED.currency_id, EXCLUDED.payback_years, EXCLUDED.deleted_at) THEN 1 ELSE 0 END
WHERE t.replica_version < EXCLUDED.replica_version AND t.developer_id = EXCLUDED.developer_id
RETURNING t.*, (t.xmax = 0) AS inserted

-- name: upsert_buildings
INSERT INTO chessboard.buildings AS t
    (id, external_talent_id, sync_source, replica_version, last_synced_at, version, deleted_at,
     tenant_id, project_id, status, name, floors_count)
SELECT u.id, u.external_talent_id, 'TalentChessboard', u.replica_version, now(), 1, u.deleted_at,
       u.tenant_id, u.project_id, 'Draft', u.name, u.floors_count
FROM unnest(CAST(:id AS uuid[]), CAST(:external_talent_id AS uuid[]), CAST(:replica_version AS bigint[]),
            CAST(:deleted_at AS timestamptz[]), CAST(:tenant_id AS uuid[]), CAST(:project_id AS uuid[]),
            CAST(:name AS text[]), CAST(:floors_count AS smallint[]))
     WITH ORDINALITY AS u(id, external_talent_id, replica_version, deleted_at, tenant_id,
                          project_id, name, floors_count, ord)
ORDER BY u.ord
ON CONFLICT (external_talent_id) DO UPDATE SET
    tenant_id = EXCLUDED.tenant_id,
    project_id = EXCLUDED.project_id,
    name = EXCLUDED.name,
    floors_count = EXCLUDED.floors_count,
    deleted_at = EXCLUDED.deleted_at,
    sync_source = EXCLUDED.sync_source,
    replica_version = EXCLUDED.replica_version,
    last_synced_at = now(),
    updated_at = CASE WHEN ROW(t.tenant_id, t.project_id, t.name, t.floors_count, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.name, EXCLUDED.floors_count, EXCLUDED.deleted_at) THEN now() ELSE t.updated_at END,
    version = t.version + CASE WHEN ROW(t.tenant_id, t.project_id, t.name, t.floors_count, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.name, EXCLUDED.floors_count, EXCLUDED.deleted_at) THEN 1 ELSE 0 END
WHERE t.replica_version < EXCLUDED.replica_version
RETURNING t.*, (t.xmax = 0) AS inserted

-- name: upsert_layout_groups
INSERT INTO chessboard.layout_groups AS t
    (id, external_talent_id, sync_source, replica_version, last_synced_at, version, deleted_at,
     tenant_id, project_id, name, rooms)
SELECT u.id, u.external_talent_id, 'TalentChessboard', u.replica_version, now(), 1, u.deleted_at,
       u.tenant_id, u.project_id, u.name, u.rooms
FROM unnest(CAST(:id AS uuid[]), CAST(:external_talent_id AS uuid[]), CAST(:replica_version AS bigint[]),
            CAST(:deleted_at AS timestamptz[]), CAST(:tenant_id AS uuid[]), CAST(:project_id AS uuid[]),
            CAST(:name AS text[]), CAST(:rooms AS smallint[]))
     WITH ORDINALITY AS u(id, external_talent_id, replica_version, deleted_at, tenant_id,
                          project_id, name, rooms, ord)
ORDER BY u.ord
ON CONFLICT (external_talent_id) DO UPDATE SET
    tenant_id = EXCLUDED.tenant_id,
    project_id = EXCLUDED.project_id,
    name = EXCLUDED.name,
    rooms = EXCLUDED.rooms,
    deleted_at = EXCLUDED.deleted_at,
    sync_source = EXCLUDED.sync_source,
    replica_version = EXCLUDED.replica_version,
    last_synced_at = now(),
    updated_at = CASE WHEN ROW(t.tenant_id, t.project_id, t.name, t.rooms, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.name, EXCLUDED.rooms, EXCLUDED.deleted_at) THEN now() ELSE t.updated_at END,
    version = t.version + CASE WHEN ROW(t.tenant_id, t.project_id, t.name, t.rooms, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.name, EXCLUDED.rooms, EXCLUDED.deleted_at) THEN 1 ELSE 0 END
WHERE t.replica_version < EXCLUDED.replica_version
RETURNING t.*, (t.xmax = 0) AS inserted

-- name: upsert_layouts
INSERT INTO chessboard.layouts AS t
    (id, external_talent_id, sync_source, replica_version, last_synced_at, version, deleted_at,
     tenant_id, project_id, layout_group_id, name, rooms, total_area)
SELECT u.id, u.external_talent_id, 'TalentChessboard', u.replica_version, now(), 1, u.deleted_at,
       u.tenant_id, u.project_id, u.layout_group_id, u.name, u.rooms, u.total_area
FROM unnest(CAST(:id AS uuid[]), CAST(:external_talent_id AS uuid[]), CAST(:replica_version AS bigint[]),
            CAST(:deleted_at AS timestamptz[]), CAST(:tenant_id AS uuid[]), CAST(:project_id AS uuid[]),
            CAST(:layout_group_id AS uuid[]), CAST(:name AS text[]), CAST(:rooms AS smallint[]),
            CAST(:total_area AS numeric[]))
     WITH ORDINALITY AS u(id, external_talent_id, replica_version, deleted_at, tenant_id,
                          project_id, layout_group_id, name, rooms, total_area, ord)
ORDER BY u.ord
ON CONFLICT (external_talent_id) DO UPDATE SET
    tenant_id = EXCLUDED.tenant_id,
    project_id = EXCLUDED.project_id,
    layout_group_id = EXCLUDED.layout_group_id,
    name = EXCLUDED.name,
    rooms = EXCLUDED.rooms,
    total_area = EXCLUDED.total_area,
    deleted_at = EXCLUDED.deleted_at,
    sync_source = EXCLUDED.sync_source,
    replica_version = EXCLUDED.replica_version,
    last_synced_at = now(),
    updated_at = CASE WHEN ROW(t.tenant_id, t.project_id, t.layout_group_id, t.name, t.rooms, t.total_area, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.layout_group_id, EXCLUDED.name, EXCLUDED.rooms, EXCLUDED.total_area, EXCLUDED.deleted_at) THEN now() ELSE t.updated_at END,
    version = t.version + CASE WHEN ROW(t.tenant_id, t.project_id, t.layout_group_id, t.name, t.rooms, t.total_area, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.layout_group_id, EXCLUDED.name, EXCLUDED.rooms, EXCLUDED.total_area, EXCLUDED.deleted_at) THEN 1 ELSE 0 END
WHERE t.replica_version < EXCLUDED.replica_version
RETURNING t.*, (t.xmax = 0) AS inserted

-- name: upsert_property_objects
-- Property objects take Talent's status with status_source = TalentSync, on create and on update.
INSERT INTO chessboard.property_objects AS t
    (id, external_talent_id, sync_source, replica_version, last_synced_at, version, deleted_at,
     tenant_id, project_id, building_id, layout_id, number, floor, section, status, status_source,
     price, total_area)
SELECT u.id, u.external_talent_id, 'TalentChessboard', u.replica_version, now(), 1, u.deleted_at,
       u.tenant_id, u.project_id, u.building_id, u.layout_id, u.number, u.floor, u.section,
       u.status, 'TalentSync', u.price, u.total_area
FROM unnest(CAST(:id AS uuid[]), CAST(:external_talent_id AS uuid[]), CAST(:replica_version AS bigint[]),
            CAST(:deleted_at AS timestamptz[]), CAST(:tenant_id AS uuid[]), CAST(:project_id AS uuid[]),
            CAST(:building_id AS uuid[]), CAST(:layout_id AS uuid[]), CAST(:number AS text[]),
            CAST(:floor AS smallint[]), CAST(:section AS smallint[]), CAST(:status AS text[]),
            CAST(:price AS numeric[]), CAST(:total_area AS numeric[]))
     WITH ORDINALITY AS u(id, external_talent_id, replica_version, deleted_at, tenant_id,
                          project_id, building_id, layout_id, number, floor, section, status,
                          price, total_area, ord)
ORDER BY u.ord
ON CONFLICT (external_talent_id) DO UPDATE SET
    tenant_id = EXCLUDED.tenant_id,
    project_id = EXCLUDED.project_id,
    building_id = EXCLUDED.building_id,
    layout_id = EXCLUDED.layout_id,
    number = EXCLUDED.number,
    floor = EXCLUDED.floor,
    section = EXCLUDED.section,
    status = EXCLUDED.status,
    status_source = EXCLUDED.status_source,
    price = EXCLUDED.price,
    total_area = EXCLUDED.total_area,
    deleted_at = EXCLUDED.deleted_at,
    sync_source = EXCLUDED.sync_source,
    replica_version = EXCLUDED.replica_version,
    last_synced_at = now(),
    updated_at = CASE WHEN ROW(t.tenant_id, t.project_id, t.building_id, t.layout_id, t.number, t.floor, t.section, t.status, t.status_source, t.price, t.total_area, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.building_id, EXCLUDED.layout_id, EXCLUDED.number, EXCLUDED.floor, EXCLUDED.section, EXCLUDED.status, EXCLUDED.status_source, EXCLUDED.price, EXCLUDED.total_area, EXCLUDED.deleted_at) THEN now() ELSE t.updated_at END,
    version = t.version + CASE WHEN ROW(t.tenant_id, t.project_id, t.building_id, t.layout_id, t.number, t.floor, t.section, t.status, t.status_source, t.price, t.total_area, t.deleted_at)
        IS DISTINCT FROM ROW(EXCLUDED.tenant_id, EXCLUDED.project_id, EXCLUDED.building_id, EXCLUDED.layout_id, EXCLUDED.number, EXCLUDED.floor, EXCLUDED.section, EXCLUDED.status, EXCLUDED.status_source, EXCLUDED.price, EXCLUDED.total_area, EXCLUDED.deleted_at) THEN 1 ELSE 0 END
WHERE t.replica_version < EXCLUDED.replica_version
-- the columns of the events and the recalc, no more (each returned column is parsed by the driver)
RETURNING t.id, t.external_talent_id, t.version, t.tenant_id, t.project_id, t.building_id, t.layout_id,
          t.number, t.floor, t.section, t.status, t.status_source, t.price, t.total_area, t.deleted_at,
          (t.xmax = 0) AS inserted

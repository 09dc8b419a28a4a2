-- The replica apply path (replica/apply.py): one statement per step and batch, never one per row.
-- Run through queries("replica") on a raw cursor in the caller's transaction
-- (store/cursor.py). Arrays arrive one per column (`unnest ... WITH ORDINALITY`, rows kept in batch
-- order: the live-number index is checked row by row, so the order of a batch is the order of application).
-- `{table}`, `{columns}`: identifiers of entities.py, never user input, quoted by the driver (with_identifiers).
-- The upserts of the replica tables are written from the entities' declarations
-- (store/replica_upserts.py), not here.

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

-- handbook-sync (handbook_sync/, docs/store.md#handbook-sync): the handbook replica's regions and
-- cities under their topic's version guard, and the batched republish of the live projects of a
-- renamed region or city. `{column}` is region_id or city_id (handbook_sync/store.py), never input.

-- name: handbook_stamp
-- What changes with every change handbook-sync applies (versions only grow, rows are never
-- deleted): a producer that kept the handbook reads it again when this differs (store/handbook_replica.py).
SELECT (SELECT count(*) FROM chessboard.handbook_regions) AS regions,
       (SELECT COALESCE(sum(version), 0) FROM chessboard.handbook_regions) AS region_versions,
       (SELECT count(*) FROM chessboard.handbook_cities) AS cities,
       (SELECT COALESCE(sum(version), 0) FROM chessboard.handbook_cities) AS city_versions

-- name: upsert_regions
-- One statement per poll batch: the newest value of each id (a compacted topic may still hold
-- several), applied when its version is greater than the replica's. Every CTE reads the snapshot
-- of the statement's start, so `old` holds the names before the upsert. A region the handbook did
-- not know is created (regions are Russian federal subjects: country :country_id).
WITH incoming AS (
    SELECT DISTINCT ON (u.id) u.id, u.name, u.version
    FROM unnest(CAST(:ids AS bigint[]), CAST(:names AS text[]), CAST(:versions AS bigint[])) AS u(id, name, version)
    ORDER BY u.id, u.version DESC
), old AS (
    SELECT r.id, r.name FROM chessboard.handbook_regions AS r JOIN incoming AS i ON i.id = r.id
), upserted AS (
    INSERT INTO chessboard.handbook_regions AS t (id, country_id, name, version)
    SELECT i.id, :country_id, i.name, i.version FROM incoming AS i
    ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, version = EXCLUDED.version
    WHERE t.version < EXCLUDED.version
    RETURNING t.id, t.name, t.version, (t.xmax = 0) AS inserted
)
SELECT u.id, u.name, u.version, u.inserted, o.name AS old_name
FROM upserted AS u LEFT JOIN old AS o ON o.id = u.id
ORDER BY u.id

-- name: upsert_cities
-- As upsert_regions; a city's region may change too (it is not part of a project's citySnapshot).
WITH incoming AS (
    SELECT DISTINCT ON (u.id) u.id, u.region_id, u.name, u.version
    FROM unnest(CAST(:ids AS bigint[]), CAST(:region_ids AS bigint[]), CAST(:names AS text[]), CAST(:versions AS bigint[]))
         AS u(id, region_id, name, version)
    ORDER BY u.id, u.version DESC
), old AS (
    SELECT c.id, c.name FROM chessboard.handbook_cities AS c JOIN incoming AS i ON i.id = c.id
), upserted AS (
    INSERT INTO chessboard.handbook_cities AS t (id, region_id, name, version)
    SELECT i.id, i.region_id, i.name, i.version FROM incoming AS i
    ON CONFLICT (id) DO UPDATE SET region_id = EXCLUDED.region_id, name = EXCLUDED.name,
                                   version = EXCLUDED.version
    WHERE t.version < EXCLUDED.version
    RETURNING t.id, t.name, t.version, (t.xmax = 0) AS inserted
)
SELECT u.id, u.name, u.version, u.inserted, o.name AS old_name
FROM upserted AS u LEFT JOIN old AS o ON o.id = u.id
ORDER BY u.id

-- name: request_republish
-- A renamed region / city: its live projects are republished from the first id on. A newer rename
-- while a republish is under way starts it over, so every project ends with the newest name.
INSERT INTO chessboard.handbook_republish AS t (kind, handbook_id, handbook_version)
SELECT :kind, u.id, u.version
FROM unnest(CAST(:ids AS bigint[]), CAST(:versions AS bigint[])) AS u(id, version)
ON CONFLICT (kind, handbook_id) DO UPDATE SET
    handbook_version = EXCLUDED.handbook_version,
    after_project_id = NULL,
    republished = 0,
    batches = 0,
    requested_at = now(),
    updated_at = now()

-- name: pending_republishes
SELECT kind, handbook_id, handbook_version, after_project_id, republished, batches, requested_at
FROM chessboard.handbook_republish
ORDER BY requested_at, kind, handbook_id

-- name: lock_republish
-- One batch at a time per region / city: the pending row is the batch's lock and cursor.
SELECT kind, handbook_id, handbook_version, after_project_id, republished, batches
FROM chessboard.handbook_republish
WHERE kind = :kind AND handbook_id = :handbook_id
FOR UPDATE

-- name: republish_projects
-- The next batch of live projects of the region / city after the cursor, in id order: version + 1
-- (the caller writes their project-upserted events in the same transaction). Index
-- ix_projects_{region,city}_live walks them without a sort.
WITH batch AS (
    SELECT p.id
    FROM chessboard.projects AS p
    WHERE p.{column} = :handbook_id AND p.deleted_at IS NULL
      AND (CAST(:after_project_id AS uuid) IS NULL OR p.id > CAST(:after_project_id AS uuid))
    ORDER BY p.id
    LIMIT :batch_size
    FOR UPDATE OF p
)
UPDATE chessboard.projects AS t
SET version = t.version + 1, updated_at = now()
FROM batch
WHERE t.id = batch.id
RETURNING t.*

-- name: advance_republish
UPDATE chessboard.handbook_republish
SET after_project_id = :after_project_id, republished = republished + :republished,
    batches = batches + 1, updated_at = now()
WHERE kind = :kind AND handbook_id = :handbook_id

-- name: finish_republish
DELETE FROM chessboard.handbook_republish WHERE kind = :kind AND handbook_id = :handbook_id

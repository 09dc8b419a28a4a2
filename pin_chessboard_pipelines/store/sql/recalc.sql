-- project-aggregates-recalc (docs/project-aggregates-recalc.md): the drain side of the queue, the
-- set-based recompute, the runbook operations, the audit and the gauges the exporter reads.
-- Aggregate formulas: docs/project-aggregates-recalc.md#aggregates.

-- name: select_due_batch
-- Up to batch_size due rows, oldest DueAt first. SKIP LOCKED leaves out rows another drain is
-- processing right now; each row is locked again (claim_project) in its project's transaction.
-- Poison rows (attempt_count >= poison_attempts) and rows that failed earlier in this drain wait.
-- A row held by a Running import run waits for the end of that run.
SELECT project_id
FROM chessboard.project_recalc_requests AS r
WHERE due_at <= now()
  AND attempt_count < :poison_attempts
  AND NOT (project_id = ANY (CAST(:exclude AS uuid[])))
  AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))
ORDER BY due_at, project_id
LIMIT :batch_size
FOR UPDATE SKIP LOCKED

-- fragment: claimed_rows
-- Queue rows as a claim reads them (recalc/queue.py Claim), each with whether its project carries
-- aggregates (it exists and is neither deleted nor archived).
SELECT r.project_id,
       r.tenant_id,
       r.requested_count,
       r.last_reason,
       extract(epoch FROM clock_timestamp() - r.first_requested_at)::float8 AS waited_seconds,
       (p.id IS NOT NULL AND p.deleted_at IS NULL AND p.status <> 'Archived') AS live
FROM chessboard.project_recalc_requests r
LEFT JOIN chessboard.projects p ON p.id = r.project_id

-- name: claim_project
-- Locks one due queue row for the project's transaction (none: taken by another drain, already
-- drained, no longer due, or poison).
-- include: claimed_rows
WHERE r.project_id = :project_id
  AND r.due_at <= now()
  AND r.attempt_count < :poison_attempts
  AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))
FOR UPDATE OF r SKIP LOCKED

-- name: claim_due_batch
-- The batch's transaction, first statement: locks up to :batch_size due rows, oldest DueAt first,
-- skipping rows another drain holds (SKIP LOCKED), poison rows, :exclude and rows held by a live
-- import run (select_due_batch's rules).
-- include: claimed_rows
WHERE r.due_at <= now()
  AND r.attempt_count < :poison_attempts
  AND NOT (r.project_id = ANY (CAST(:exclude AS uuid[])))
  AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))
ORDER BY r.due_at, r.project_id
LIMIT :batch_size
FOR UPDATE OF r SKIP LOCKED

-- fragment: aggregates_of_live
-- The aggregates of the projects in the including query's `live` CTE (id), by their formulas
-- (docs/project-aggregates-recalc.md#aggregates): of each project, and of its buildings, layouts
-- and layout groups. Buildings, layouts and layout groups count the rows that point at them,
-- wherever those rows' projects are (a moved layout, layout group or building; docs/store.md#moves).
-- It ends with a comma: the including query's next CTE follows.
project_aggregates AS (
    SELECT live.id,
           count(o.id)::int AS total,
           (count(o.id) FILTER (WHERE o.status = 'Free'))::int AS free,
           min(o.price) FILTER (WHERE o.status = 'Free') AS price_min,
           max(o.price) FILTER (WHERE o.status = 'Free') AS price_max
    FROM live
    LEFT JOIN chessboard.property_objects o
           ON o.project_id = live.id AND o.deleted_at IS NULL AND o.status <> 'Hidden'
    GROUP BY live.id
),
building_aggregates AS (
    SELECT b.id,
           count(o.id)::int AS total,
           (count(o.id) FILTER (WHERE o.status = 'Free'))::int AS free
    FROM chessboard.buildings b
    JOIN live ON b.project_id = live.id
    LEFT JOIN chessboard.property_objects o
           ON o.building_id = b.id AND o.deleted_at IS NULL AND o.status <> 'Hidden'
    GROUP BY b.id
),
layout_aggregates AS (
    SELECT l.id, count(o.id)::int AS objects
    FROM chessboard.layouts l
    JOIN live ON l.project_id = live.id
    LEFT JOIN chessboard.property_objects o
           ON o.layout_id = l.id AND o.deleted_at IS NULL AND o.status <> 'Hidden'
    GROUP BY l.id
),
group_aggregates AS (
    -- live layouts of the group (deleted_at is null)
    SELECT g.id,
           count(l.id)::int AS layouts,
           min(l.total_area) AS area_min,
           max(l.total_area) AS area_max
    FROM chessboard.layout_groups g
    JOIN live ON g.project_id = live.id
    LEFT JOIN chessboard.layouts l ON l.layout_group_id = g.id AND l.deleted_at IS NULL
    GROUP BY g.id
),

-- name: recalc_batch
-- The claimed projects of a batch at once (:claimed, uuid array; a project's own transaction, the
-- batch's fallback, passes one): one statement recomputes the aggregates of the live ones, writes
-- only rows whose values differ, bumps version/updated_at there, deletes every claimed queue row
-- (archived and deleted projects' too: nothing else of theirs is written) and returns the changed
-- project/layout/layout-group rows (JSON text) by project for the outbox, and per project the
-- number of changed buildings.
-- Buildings: counters and updated_at only; their counters are outside the published building
-- snapshot, and `version` counts published changes
-- (docs/project-aggregates-recalc.md#republish-only-on-change).
WITH live AS (
    SELECT id
    FROM chessboard.projects
    WHERE id = ANY (CAST(:claimed AS uuid[])) AND deleted_at IS NULL AND status <> 'Archived'
),
-- include: aggregates_of_live
project_changed AS (
    UPDATE chessboard.projects t
    SET (price_min, price_max, property_objects_total_count, property_objects_free_count, version, updated_at)
        = (n.price_min, n.price_max, n.total, n.free, t.version + 1, now())
    FROM project_aggregates n
    WHERE t.id = n.id
      AND (t.price_min, t.price_max, t.property_objects_total_count, t.property_objects_free_count)
          IS DISTINCT FROM (n.price_min, n.price_max, n.total, n.free)
    RETURNING t.*
),
building_changed AS (
    UPDATE chessboard.buildings t
    SET (property_objects_total_count, property_objects_free_count, updated_at) = (n.total, n.free, now())
    FROM building_aggregates n
    WHERE t.id = n.id
      AND (t.property_objects_total_count, t.property_objects_free_count) IS DISTINCT FROM (n.total, n.free)
    RETURNING t.project_id
),
layout_changed AS (
    UPDATE chessboard.layouts t
    SET (property_objects_count, version, updated_at) = (n.objects, t.version + 1, now())
    FROM layout_aggregates n
    WHERE t.id = n.id
      AND t.property_objects_count IS DISTINCT FROM n.objects
    RETURNING t.*
),
group_changed AS (
    UPDATE chessboard.layout_groups t
    SET (layouts_count, area_min, area_max, version, updated_at)
        = (n.layouts, n.area_min, n.area_max, t.version + 1, now())
    FROM group_aggregates n
    WHERE t.id = n.id
      AND (t.layouts_count, t.area_min, t.area_max) IS DISTINCT FROM (n.layouts, n.area_min, n.area_max)
    RETURNING t.*
),
dequeued AS (
    DELETE FROM chessboard.project_recalc_requests
    WHERE project_id = ANY (CAST(:claimed AS uuid[]))
    RETURNING 1
)
SELECT 'project' AS entity, c.id::text AS project_id, to_jsonb(c)::text AS row FROM project_changed c
UNION ALL
SELECT 'layout', c.project_id::text, to_jsonb(c)::text FROM layout_changed c
UNION ALL
SELECT 'layout_group', c.project_id::text, to_jsonb(c)::text FROM group_changed c
UNION ALL
SELECT 'building', c.project_id::text, count(*)::text FROM building_changed c GROUP BY c.project_id
UNION ALL
SELECT 'dequeued', NULL, count(*)::text FROM dequeued

-- name: dequeue_project
-- Archived or deleted project: the row goes, nothing else changes
-- (docs/project-aggregates-recalc.md#one-transaction-per-project).
DELETE FROM chessboard.project_recalc_requests
WHERE project_id = :project_id
RETURNING requested_count

-- name: record_failure
-- In its own transaction after the project's rollback: DueAt stays, the row waits for the next tick.
UPDATE chessboard.project_recalc_requests
SET attempt_count = attempt_count + 1,
    last_error = left(:error, 1024),
    updated_at = now()
WHERE project_id = :project_id
RETURNING attempt_count

-- name: due_summary
-- What the sensor needs: due rows the drain would take, and poison rows kept for the runbook.
SELECT count(*) FILTER (WHERE attempt_count < :poison_attempts) AS due,
       count(*) FILTER (WHERE attempt_count >= :poison_attempts) AS poison,
       min(due_at) FILTER (WHERE attempt_count < :poison_attempts) AS oldest_due_at
FROM chessboard.project_recalc_requests AS r
WHERE due_at <= now() AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))

-- name: next_due
-- Seconds from now to the earliest DueAt the drain will take at or after :after (Unix time; 0 = any
-- row), NULL when there is none: the long-lived drain sleeps until then, the sensor starts a run
-- ahead of it. Poison rows and rows in :exclude (backing off after a failure) are left out.
SELECT extract(epoch FROM min(due_at) - clock_timestamp())::float8 AS next_due_in
FROM chessboard.project_recalc_requests AS r
WHERE attempt_count < :poison_attempts
  AND due_at >= to_timestamp(:after)
  AND NOT (project_id = ANY (CAST(:exclude AS uuid[])))
  AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))

-- name: poison_rows
-- Rows the drain skips (AttemptCount >= poison threshold), CHESSBOARD_RECALC_POISON.
SELECT project_id, tenant_id, attempt_count, last_error, last_reason, due_at, first_requested_at, updated_at
FROM chessboard.project_recalc_requests
WHERE attempt_count >= :poison_attempts
ORDER BY updated_at, project_id

-- name: reset_poison
-- Runbook "poison project": AttemptCount = 0, DueAt = now().
UPDATE chessboard.project_recalc_requests
SET attempt_count = 0,
    due_at = now(),
    updated_at = now()
WHERE project_id = :project_id
RETURNING project_id, tenant_id, last_error

-- name: project_tenant
SELECT tenant_id FROM chessboard.projects WHERE id = :project_id

-- name: queue_row
SELECT project_id, tenant_id, due_at, first_requested_at, requested_count, last_reason,
       attempt_count, last_error, created_at, updated_at
FROM chessboard.project_recalc_requests
WHERE project_id = :project_id

-- name: queue_depth
-- Gauge chessboard_recalc_queue_depth: rows in the queue.
SELECT count(*) AS value FROM chessboard.project_recalc_requests

-- name: due_backlog
-- Gauge chessboard_recalc_due_backlog: rows whose DueAt has passed and that the drain will take
-- (poison rows are chessboard_recalc_poison_rows; counting them here kept the backlog alert firing;
-- a request held by a Running import run waits for the run).
SELECT count(*) AS value FROM chessboard.project_recalc_requests AS r
WHERE due_at <= now() AND attempt_count < :poison_attempts
  AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))

-- name: held_count
-- Gauge chessboard_recalc_held_rows: rows held by a Running import run (outside due_backlog; they
-- become due when the run ends, docs/store.md#held-requests).
SELECT count(*) AS value FROM chessboard.project_recalc_requests AS r
WHERE attempt_count < :poison_attempts AND r.import_run_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds))

-- name: poison_count
-- Gauge chessboard_recalc_poison_rows: rows kept for the runbook (threshold from settings).
SELECT count(*) AS value FROM chessboard.project_recalc_requests WHERE attempt_count >= :poison_attempts

-- name: audit
-- Every stored aggregate that differs from its formula, for live projects (all, or one project).
-- Each level is computed on its own (objects by building, by layout; layouts by group), so a
-- divergence also shows rows whose links disagree with their project.
WITH live AS (
    SELECT id
    FROM chessboard.projects
    WHERE deleted_at IS NULL
      AND status <> 'Archived'
      AND (CAST(:project_id AS uuid) IS NULL OR id = CAST(:project_id AS uuid))
),
-- include: aggregates_of_live
divergences AS (
    SELECT 'project' AS entity, p.id, p.id AS project_id, f.field, f.stored, f.expected
    FROM chessboard.projects p
    JOIN project_aggregates e ON e.id = p.id
    CROSS JOIN LATERAL (VALUES
        ('price_min', p.price_min, e.price_min),
        ('price_max', p.price_max, e.price_max),
        ('property_objects_total_count', p.property_objects_total_count::numeric, e.total::numeric),
        ('property_objects_free_count', p.property_objects_free_count::numeric, e.free::numeric)
    ) AS f(field, stored, expected)
    UNION ALL
    SELECT 'building', b.id, b.project_id, f.field, f.stored, f.expected
    FROM chessboard.buildings b
    JOIN building_aggregates e ON e.id = b.id
    CROSS JOIN LATERAL (VALUES
        ('property_objects_total_count', b.property_objects_total_count::numeric, e.total::numeric),
        ('property_objects_free_count', b.property_objects_free_count::numeric, e.free::numeric)
    ) AS f(field, stored, expected)
    UNION ALL
    SELECT 'layout', l.id, l.project_id, 'property_objects_count',
           l.property_objects_count::numeric, e.objects::numeric
    FROM chessboard.layouts l
    JOIN layout_aggregates e ON e.id = l.id
    UNION ALL
    SELECT 'layout_group', g.id, g.project_id, f.field, f.stored, f.expected
    FROM chessboard.layout_groups g
    JOIN group_aggregates e ON e.id = g.id
    CROSS JOIN LATERAL (VALUES
        ('layouts_count', g.layouts_count::numeric, e.layouts::numeric),
        ('area_min', g.area_min, e.area_min),
        ('area_max', g.area_max, e.area_max)
    ) AS f(field, stored, expected)
)
SELECT d.entity, d.id, d.project_id, d.field, d.stored::text AS stored, d.expected::text AS expected,
       -- a project with a row in the recalc queue is pending, not drift (docs/project-aggregates-recalc.md#audit)
       EXISTS (SELECT 1 FROM chessboard.project_recalc_requests r WHERE r.project_id = d.project_id) AS pending
FROM divergences d
WHERE d.stored IS DISTINCT FROM d.expected
ORDER BY d.project_id, d.entity, d.id, d.field

-- name: queue_status
-- `recalc status`: the queue at a glance.
SELECT count(*) AS depth,
       count(*) FILTER (WHERE due_at <= now() AND attempt_count < :poison_attempts
                        AND (r.import_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)))) AS due,
       count(*) FILTER (WHERE attempt_count >= :poison_attempts) AS poison,
       -- held by a Running import run: waits for the run's end, due or not (not in `due`)
       count(*) FILTER (WHERE attempt_count < :poison_attempts AND r.import_run_id IS NOT NULL
                        AND EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds))) AS held,
       min(due_at) FILTER (WHERE attempt_count < :poison_attempts) AS next_due_at,
       coalesce(sum(requested_count), 0) AS requested
FROM chessboard.project_recalc_requests AS r

-- name: aggregates_sample
-- `recalc status --projects N`: the largest live projects with their aggregates.
SELECT p.id, p.name, p.status, p.property_objects_total_count AS total, p.property_objects_free_count AS free,
       p.price_min, p.price_max, p.version,
       (SELECT count(*) FROM chessboard.layout_groups g WHERE g.project_id = p.id) AS layout_groups,
       (SELECT count(*) FROM chessboard.layouts l WHERE l.project_id = p.id AND l.deleted_at IS NULL) AS layouts
FROM chessboard.projects p
WHERE p.deleted_at IS NULL AND p.status <> 'Archived'
ORDER BY p.property_objects_total_count DESC, p.name, p.id
LIMIT :limit

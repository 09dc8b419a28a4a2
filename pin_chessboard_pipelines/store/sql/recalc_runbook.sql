-- The recalc runbook by clicks (docs/project-aggregates-recalc.md#runbook): finding a project by
-- what an operator knows of it, and the queue's status with its oldest rows.

-- name: find_projects
-- A project by PIN id or Talent id (:uuid, NULL when the reference is no UUID) or by name (exact,
-- case-insensitive); live ones first. At most 11 rows: enough to say "ambiguous" and list 10.
SELECT id, external_talent_id, name, tenant_id, status, deleted_at,
       CASE WHEN id = CAST(:uuid AS uuid) THEN 'PinId'
            WHEN external_talent_id = CAST(:uuid AS uuid) THEN 'TalentId'
            ELSE 'Name' END AS matched_by
FROM chessboard.projects
WHERE id = CAST(:uuid AS uuid)
   OR external_talent_id = CAST(:uuid AS uuid)
   OR lower(name) = lower(:name)
ORDER BY deleted_at NULLS FIRST, name, id
LIMIT 11

-- name: read_at
-- The time a status is read at: now() of the read's transaction, which every statement of it (the
-- states of oldest_rows, due, held) is computed against.
SELECT now() AS read_at

-- name: held_count
-- Rows held by a live Running import run (they wait for the run's end, docs/talent-initial-import.md#events-and-recalc-requests).
SELECT count(*) AS held
FROM chessboard.project_recalc_requests AS r
WHERE r.import_run_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM chessboard.talent_import_runs i WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds))

-- name: oldest_rows
-- The :limit rows with the earliest DueAt, due or not, with their project's name and state:
-- poison (AttemptCount >= :poison_attempts), held (by a Running import run), due (DueAt passed)
-- or waiting (DueAt still ahead: the debounce).
SELECT r.project_id, p.name, p.external_talent_id, r.due_at, r.first_requested_at, r.requested_count,
       r.last_reason, r.attempt_count, r.last_error,
       CASE WHEN r.attempt_count >= :poison_attempts THEN 'poison'
            WHEN r.import_run_id IS NOT NULL AND EXISTS (
                SELECT 1 FROM chessboard.talent_import_runs i
                WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds)) THEN 'held'
            WHEN r.due_at <= now() THEN 'due'
            ELSE 'waiting' END AS state
FROM chessboard.project_recalc_requests AS r
LEFT JOIN chessboard.projects AS p ON p.id = r.project_id
ORDER BY r.due_at, r.project_id
LIMIT :limit

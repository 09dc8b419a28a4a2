-- The recalc queue (docs/project-aggregates-recalc.md#queue-and-debounce), enqueue side.

-- name: enqueue_recalc
-- Debounced trailing upsert: new row -> due = now + debounce; existing row ->
-- due = least(now + debounce, first_requested_at + cap), requested_count + 1.
-- :force (runbook "force recalc") sets due = now. One statement for many projects.
-- :run_id (an import run's pages): the row is held for that run until it finishes, and counts
-- once per run however many pages touch the project (docs/talent-initial-import.md#events-and-recalc-requests).
INSERT INTO chessboard.project_recalc_requests AS r
    (project_id, tenant_id, due_at, first_requested_at, requested_count, last_reason,
     attempt_count, created_at, updated_at, import_run_id)
SELECT t.project_id, t.tenant_id,
       CASE WHEN :force THEN now() ELSE now() + make_interval(secs => :debounce) END,
       now(), 1, :reason, 0, now(), now(), CAST(:run_id AS uuid)
FROM unnest(CAST(:project_ids AS uuid[]), CAST(:tenant_ids AS uuid[])) AS t(project_id, tenant_id)
ORDER BY t.project_id
ON CONFLICT (project_id) DO UPDATE SET
    due_at = CASE WHEN :force THEN now()
                  ELSE least(now() + make_interval(secs => :debounce),
                             r.first_requested_at + make_interval(secs => :cap)) END,
    requested_count = r.requested_count
        + CASE WHEN CAST(:run_id AS uuid) IS NOT NULL
                    AND r.import_run_id IS NOT DISTINCT FROM CAST(:run_id AS uuid) THEN 0 ELSE 1 END,
    import_run_id = coalesce(CAST(:run_id AS uuid), r.import_run_id),
    last_reason = EXCLUDED.last_reason,
    updated_at = now()

-- name: release_import_requests
-- The end of an import run (Completed, Failed or Cancelled): its held requests become due after
-- the debounce, one per project.
UPDATE chessboard.project_recalc_requests
SET import_run_id = NULL,
    due_at = now() + make_interval(secs => :debounce),
    updated_at = now()
WHERE import_run_id = CAST(:run_id AS uuid)

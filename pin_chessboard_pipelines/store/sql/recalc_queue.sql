-- The recalc queue (docs/project-aggregates-recalc.md#queue-and-debounce), enqueue side.

-- name: enqueue_recalc
-- Debounced trailing upsert: new row -> due = now + debounce; existing row ->
-- due = least(now + debounce, first_requested_at + cap), requested_count + 1.
-- :force (runbook "force recalc") sets due = now. One statement for many projects.
INSERT INTO chessboard.project_recalc_requests AS r
    (project_id, tenant_id, due_at, first_requested_at, requested_count, last_reason,
     attempt_count, created_at, updated_at)
SELECT t.project_id, t.tenant_id,
       CASE WHEN :force THEN now() ELSE now() + make_interval(secs => :debounce) END,
       now(), 1, :reason, 0, now(), now()
FROM unnest(CAST(:project_ids AS uuid[]), CAST(:tenant_ids AS uuid[])) AS t(project_id, tenant_id)
ORDER BY t.project_id
ON CONFLICT (project_id) DO UPDATE SET
    due_at = CASE WHEN :force THEN now()
                  ELSE least(now() + make_interval(secs => :debounce),
                             r.first_requested_at + make_interval(secs => :cap)) END,
    requested_count = r.requested_count + 1,
    last_reason = EXCLUDED.last_reason,
    updated_at = now()

-- The recalc queue (docs/project-aggregates-recalc.md#queue-and-debounce), enqueue side.

-- name: enqueue_recalc
-- Debounced trailing upsert: new row -> due = now + debounce; existing row ->
-- due = least(now + debounce, first_requested_at + cap), requested_count + 1.
-- :force (runbook "force recalc") sets due = now. One statement for many projects.
-- :run_id (an import run's pages): the row is held for that run until it finishes, and counts
-- once per run however many pages touch the project (docs/talent-initial-import.md#events-and-recalc-requests).
-- Only the import's own requests are held: a request without :run_id (streaming sync, runbook,
-- CRUD) on a held row unholds it, and an import's request on a row already queued by something
-- else leaves it unheld, due by the debounce and the cap (docs/store.md#held-requests).
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
    import_run_id = CASE WHEN r.import_run_id IS NULL THEN NULL ELSE CAST(:run_id AS uuid) END,
    last_reason = EXCLUDED.last_reason,
    updated_at = now()

-- fragment: release_held
-- A held request released (the end of its import run): due by the debounce and the cap, counted
-- from the first request, one per project. The release is when a held request could first be
-- served, so first_requested_at becomes the release: the recalc lag
-- (chessboard_recalc_event_lag_seconds) and the cap of later requests count from it, not from the
-- start of a 2-hour bootstrap.
SET import_run_id = NULL,
    due_at = least(now() + make_interval(secs => :debounce),
                   r.first_requested_at + make_interval(secs => :cap)),
    first_requested_at = now(),
    updated_at = now()

-- name: release_import_requests
-- The end of an import run (Completed, Failed or Cancelled, also a run marked failed because its
-- process is gone): its held requests are released.
UPDATE chessboard.project_recalc_requests AS r
-- include: release_held
WHERE r.import_run_id = CAST(:run_id AS uuid)

-- name: release_dagster_run_requests
-- The requests held by the import runs of these Dagster runs (marked failed: their process is
-- gone), released whatever their run row still says.
UPDATE chessboard.project_recalc_requests AS r
-- include: release_held
WHERE r.import_run_id IN (SELECT i.id FROM chessboard.talent_import_runs i
                          WHERE i.dagster_run_id = ANY (CAST(:dagster_run_ids AS text[])))

-- name: release_ended_import_requests
-- Every request still held by a run that is no longer Running (whoever ended it) or whose run
-- worker is gone (no heartbeat of it for :alive_seconds, a killed CLI import that stays
-- resumable; chessboard.import_run_alive): released. The drain calls it before it picks rows, so
-- neither an end path nor a dead process can leave a request held.
UPDATE chessboard.project_recalc_requests AS r
-- include: release_held
WHERE r.import_run_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM chessboard.talent_import_runs i
                  WHERE i.id = r.import_run_id AND chessboard.import_run_alive(i, :alive_seconds))

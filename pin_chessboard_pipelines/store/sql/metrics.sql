-- Gauges of live state, read by `pin-chessboard metrics serve` at scrape time (observability/
-- exporter.py, STORE_GAUGES). Each query returns one row with one column `value`. The recalc
-- queue's gauges are in recalc.sql.

-- name: outbox_backlog
-- From the relay floor up: every row below it is published (store/sql/outbox.sql).
SELECT count(*) AS value FROM chessboard.outbox_messages
WHERE published_at IS NULL AND id >= (SELECT floor_id FROM chessboard.outbox_relay_floor WHERE id = 1)

-- name: outbox_lag_seconds
SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0) AS value
FROM chessboard.outbox_messages
WHERE published_at IS NULL AND id >= (SELECT floor_id FROM chessboard.outbox_relay_floor WHERE id = 1)

-- name: import_runs_running
-- Running rows, a killed import's included (it stays Running until resumed).
SELECT count(*) AS value FROM chessboard.talent_import_runs WHERE status = 'Running'

-- name: import_running
-- 1 while an import runs: a Running row whose run worker renewed its heartbeat within
-- :alive_seconds (the process that executes its Dagster run, whoever launched it: the CLI, the UI,
-- a backfill or the full bootstrap; chessboard.import_run_alive). A run whose process holds the import
-- lock (the CLI) is not alive once nobody holds that lock: a killed CLI reads 0 at once. pg_locks
-- shows a bigint key as classid = high 32 bits, objid = low 32 bits, objsubid = 1.
SELECT (count(*) > 0)::int AS value
FROM chessboard.talent_import_runs r
WHERE chessboard.import_run_alive(r, :alive_seconds)
  AND NOT (r.lock_held AND NOT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = ((CAST(:import_lock_key AS bigint) >> 32) & 4294967295)::bigint::oid
      AND l.objid = (CAST(:import_lock_key AS bigint) & 4294967295)::bigint::oid
  ))

-- name: import_processes
-- The processes (claimed_by = <host>:<pid>, a pod's host is its name) working on pages of a
-- Running run: they hold an InProgress page with a fresh heartbeat, or finished one in the last
-- :recent_seconds seconds (a page of a few items takes milliseconds; a scrape between two pages
-- still sees the process).
SELECT count(DISTINCT p.claimed_by) AS value
FROM chessboard.talent_import_pages p
JOIN chessboard.talent_import_runs r ON r.id = p.run_id AND r.status = 'Running'
WHERE p.claimed_by IS NOT NULL
  AND ((p.status = 'InProgress' AND p.heartbeat_at > now() - make_interval(secs => :alive_seconds))
       OR p.finished_at > now() - make_interval(secs => :recent_seconds))

-- name: import_throughput
-- Items of the Running runs' pages Done in the last :window_seconds seconds, per second.
SELECT coalesce(sum(p.items_applied + p.items_skipped + p.items_failed), 0)::float
       / CAST(:window_seconds AS float) AS value
FROM chessboard.talent_import_pages p
WHERE p.run_id IN (SELECT id FROM chessboard.talent_import_runs WHERE status = 'Running')
  AND p.status = 'Done'
  AND p.updated_at > now() - make_interval(secs => CAST(:window_seconds AS float))

-- name: import_run_duration
SELECT coalesce(extract(epoch FROM now() - min(started_at)), 0) AS value
FROM chessboard.talent_import_runs WHERE status = 'Running'

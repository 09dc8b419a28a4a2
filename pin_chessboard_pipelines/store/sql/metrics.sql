-- Gauges that describe the store, read by `pin-chessboard metrics serve` at scrape time.
-- Each query returns one row with one column `value`. The recalc queue's gauges are in recalc.sql.

-- name: outbox_backlog
SELECT count(*) AS value FROM chessboard.outbox_messages WHERE published_at IS NULL

-- name: outbox_lag_seconds
SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0) AS value
FROM chessboard.outbox_messages WHERE published_at IS NULL

-- name: import_running
SELECT count(*) AS value FROM chessboard.talent_import_runs WHERE status = 'Running'

-- name: write_samples
-- One flush of one process (observability/samples.py): counters and histogram buckets added to
-- the sums, `max` gauges kept when greater, the process's live gauges replaced. The rows are taken
-- in key order, so concurrent flushes of many processes lock shared rows in one order.
INSERT INTO chessboard.metric_samples AS m (kind, key, owner, value, updated_at)
SELECT s.kind, s.key, s.owner, s.value, now()
FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS s(kind text, key text, owner text, value float8)
ORDER BY s.kind, s.key, s.owner
ON CONFLICT (kind, key, owner) DO UPDATE SET
    value = CASE
        WHEN m.kind IN ('counter', 'histogram') THEN m.value + EXCLUDED.value
        WHEN m.kind = 'gauge_max' THEN GREATEST(m.value, EXCLUDED.value)
        ELSE EXCLUDED.value
    END,
    updated_at = now()

-- name: forget_owner
DELETE FROM chessboard.metric_samples WHERE owner = :owner

-- name: read_samples
-- What a scrape exposes: the sums, and the live gauges of processes that refreshed them lately.
SELECT kind, key, value
FROM chessboard.metric_samples
WHERE owner = '' OR updated_at > now() - make_interval(secs => :live_seconds)

-- name: prune_live
-- Live gauges of processes gone for a while (SIGKILL, an evicted pod): no longer read, removed.
DELETE FROM chessboard.metric_samples
WHERE owner <> '' AND updated_at < now() - make_interval(secs => :older_than_seconds)

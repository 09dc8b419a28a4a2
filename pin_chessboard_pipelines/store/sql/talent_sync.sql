-- The streaming Talent sync (talent/sync.py): one consumer at a time reads every partition.

-- name: talent_sync_try_lock
-- Session-level: held while a consumer runs, released on unlock or when its session dies.
SELECT pg_try_advisory_lock(hashtextextended('Pin:lock:job:chessboard-talent-sync', 0)) AS locked

-- name: talent_sync_unlock
SELECT pg_advisory_unlock(hashtextextended('Pin:lock:job:chessboard-talent-sync', 0)) AS unlocked

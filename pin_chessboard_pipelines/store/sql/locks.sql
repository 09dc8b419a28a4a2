-- Session-level advisory locks (store/lock.py): one bigint key per lock name, derived in Python.
-- A session lock is released by unlock or when its session ends (a dead process frees it).

-- name: advisory_try_lock
SELECT pg_try_advisory_lock(:key) AS locked

-- name: advisory_unlock
SELECT pg_advisory_unlock(:key) AS unlocked

-- name: advisory_xact_lock
-- Transaction-level: waits, released at commit or rollback.
SELECT pg_advisory_xact_lock(:key)

-- name: advisory_lock_holder
-- The backend pid holding the lock, for the operator's message (a bigint key is classid:objid).
SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND granted
  AND ((classid::bigint << 32) | objid::bigint) = CAST(:key AS bigint)
LIMIT 1

-- name: advisory_xact_lock_shared
-- Transaction-level, shared: many holders at once; waits while an exclusive holder has it.
SELECT pg_advisory_xact_lock_shared(:key)

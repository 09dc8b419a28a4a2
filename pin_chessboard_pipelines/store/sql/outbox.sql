-- The transactional outbox, relay side (docs/events.md#outbox-and-relay).
-- Read by events/relay.py and the relay sensor. The exporter's gauges chessboard_outbox_backlog and
-- chessboard_outbox_lag_seconds are store/sql/metrics.sql: outbox_backlog, outbox_lag_seconds.

-- name: outbox_copy_in
-- The writer side (events/outbox.py): one COPY of text-format rows in the caller's transaction.
COPY chessboard.outbox_messages (message_id, topic, message_key, payload, headers, occurred_at) FROM STDIN

-- name: outbox_pending_batch
-- Pending rows in commit (id) order after :after, up to :upto. The payload comes as JSON text and the
-- contract headers as columns 4..10 in HEADER_NAMES order (relay.row_headers reads them by position),
-- so the relay does not pay for decoding jsonb into dicts; so does the writer's W3C traceparent.
-- A walk of the primary key from the relay floor (outbox_relay_advance_floor) up.
SELECT id, topic, message_key, payload::text AS payload,
       headers->>'messageId' AS message_id_header,
       headers->>'occurredAt' AS occurred_at_header,
       headers->>'aggregateId' AS aggregate_id_header,
       headers->>'aggregateType' AS aggregate_type_header,
       headers->>'eventType' AS event_type_header,
       headers->>'contractVersion' AS contract_version_header,
       headers->>'correlationId' AS correlation_id_header,
       nullif((headers - ARRAY['messageId', 'occurredAt', 'aggregateId', 'aggregateType', 'eventType',
                               'contractVersion', 'correlationId', 'traceparent'])::text, '{}') AS extra_headers,
       headers->>'traceparent' AS traceparent_header
FROM chessboard.outbox_messages
WHERE published_at IS NULL AND id > :after AND id <= :upto
ORDER BY id
LIMIT :limit

-- name: outbox_mark_published
-- Only ids the broker acknowledged (:ids = a bigint array literal '{1,2,…}', cheaper to bind and
-- plan than thousands of parameters); a row already marked stays as it is. A HOT update: no btree
-- names published_at (migration 0016).
UPDATE chessboard.outbox_messages
SET published_at = now()
WHERE id = ANY(CAST(:ids AS bigint[])) AND published_at IS NULL

-- name: outbox_id_drawn
-- The highest outbox id drawn so far (committed or not). Read BEFORE outbox_relay_advance_floor
-- assigns its transaction id: a writer has its transaction id before it draws an id (the statement
-- trigger of migration 0016), so each writer of an id up to this value has a lower transaction id.
SELECT coalesce(pg_sequence_last_value('chessboard.outbox_messages_id_seq'::regclass), 0) AS drawn

-- name: outbox_relay_advance_floor
-- Every row below floor_id is published. Once every transaction below horizon_xid has ended (the
-- snapshot's xmin), no row up to horizon_id can still appear: the floor moves to the lowest pending
-- row up to horizon_id (or past it), and the horizon becomes (:drawn, this transaction's id). While
-- one is running, floor and horizon stay. A transaction that commits out of id order keeps the floor
-- below its rows until it ends. Returns the floor either way.
WITH advanced AS (
    UPDATE chessboard.outbox_relay_floor AS f
    SET floor_id = coalesce(
            (SELECT min(o.id) FROM chessboard.outbox_messages AS o
             WHERE o.id >= f.floor_id AND o.id <= f.horizon_id AND o.published_at IS NULL),
            f.horizon_id + 1),
        horizon_id = :drawn,
        horizon_xid = pg_current_xact_id()::text::bigint
    WHERE f.id = 1 AND f.horizon_xid <= pg_snapshot_xmin(pg_current_snapshot())::text::bigint
    RETURNING f.floor_id
)
SELECT floor_id FROM advanced
UNION ALL
SELECT floor_id FROM chessboard.outbox_relay_floor WHERE id = 1 AND NOT EXISTS (SELECT FROM advanced)

-- name: outbox_relay_session
-- A lost mark only republishes rows with the same messageId (at least once): the relay's commits
-- need not wait for the WAL flush. The batch read walks the primary key in id order: without a
-- btree on published_at the planner, guessing few pending rows, would otherwise gather the whole
-- id range in a bitmap and sort it for every batch.
SET synchronous_commit TO off; SET enable_bitmapscan TO off; SET enable_seqscan TO off

-- name: outbox_relay_session_reset
RESET synchronous_commit; RESET enable_bitmapscan; RESET enable_seqscan

-- name: outbox_max_id
-- The highest id written: the upper end of a fast-path call's walk.
SELECT coalesce(max(id), 0) AS max_id FROM chessboard.outbox_messages

-- name: outbox_pending_summary
-- What the relay sensor looks at: backlog, highest pending id, age of the oldest pending row
-- (from the relay floor up: every row below it is published).
SELECT count(*)::bigint AS backlog,
       coalesce(max(id), 0) AS max_id,
       coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::double precision AS oldest_age_seconds
FROM chessboard.outbox_messages
WHERE published_at IS NULL AND id >= (SELECT floor_id FROM chessboard.outbox_relay_floor WHERE id = 1)

-- name: outbox_purge_published
-- One bounded batch of published rows older than the retention (never an unbounded DELETE);
-- ix_outbox_messages_published_at_brin narrows the walk to the pages that hold such rows.
DELETE FROM chessboard.outbox_messages
WHERE id IN (
    SELECT id FROM chessboard.outbox_messages
    WHERE published_at < now() - make_interval(secs => :retention_seconds)
    ORDER BY published_at
    LIMIT :limit
)

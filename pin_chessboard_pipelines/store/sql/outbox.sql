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
-- Uses ix_outbox_messages_unpublished.
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
-- plan than thousands of parameters); a row already marked stays as it is.
UPDATE chessboard.outbox_messages
SET published_at = now()
WHERE id = ANY(CAST(:ids AS bigint[])) AND published_at IS NULL

-- name: outbox_relay_session
-- A lost mark only republishes rows with the same messageId (at least once): the relay's commits
-- need not wait for the WAL flush.
SET synchronous_commit TO off

-- name: outbox_relay_session_reset
RESET synchronous_commit

-- name: outbox_max_pending_id
SELECT coalesce(max(id), 0) AS max_id FROM chessboard.outbox_messages WHERE published_at IS NULL

-- name: outbox_pending_summary
-- What the relay sensor looks at: backlog, highest pending id, age of the oldest pending row.
SELECT count(*)::bigint AS backlog,
       coalesce(max(id), 0) AS max_id,
       coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::double precision AS oldest_age_seconds
FROM chessboard.outbox_messages
WHERE published_at IS NULL

-- name: outbox_purge_published
-- One bounded batch of published rows older than the retention (never an unbounded DELETE).
DELETE FROM chessboard.outbox_messages
WHERE id IN (
    SELECT id FROM chessboard.outbox_messages
    WHERE published_at IS NOT NULL
      AND published_at < now() - make_interval(secs => :retention_seconds)
    ORDER BY published_at
    LIMIT :limit
)

-- The talent initial import (docs/talent-initial-import.md): run rows, the page queue, counters.
-- SQLAlchemy bind style (:name), through queries("talent_import").

-- name: running_runs
-- Running runs and whether they are alive: their run worker renewed its heartbeat within
-- :alive_seconds (chessboard.import_run_alive), and a run whose process held the import lock still has a holder of it
-- (:lock_free: nobody holds it, or the caller does).
SELECT r.*,
       chessboard.import_run_alive(r, :alive_seconds) AND NOT (r.lock_held AND :lock_free) AS alive
FROM chessboard.talent_import_runs r WHERE r.status = 'Running' ORDER BY r.started_at

-- name: mark_lock_held
UPDATE chessboard.talent_import_runs SET lock_held = :lock_held WHERE id = :run_id

-- name: heartbeat_run
-- A live process of the run: its heartbeat; the status says whether the run still runs.
UPDATE chessboard.talent_import_runs SET heartbeat_at = now()
WHERE id = :run_id
RETURNING status

-- name: heartbeat_run_worker
-- The run worker of a Dagster run (the process that executes it, whatever its steps do): the
-- Running import run of that Dagster run is alive while this is renewed (import_run_alive).
UPDATE chessboard.talent_import_runs SET worker_heartbeat_at = now()
WHERE dagster_run_id = :dagster_run_id AND status = 'Running'

-- name: heartbeat_pages
-- The pages this process works on: their claims renewed. A page whose transaction runs is locked
-- by that transaction (nobody can re-claim it meanwhile): skipped, not waited for.
UPDATE chessboard.talent_import_pages SET heartbeat_at = now()
WHERE id IN (
    SELECT id FROM chessboard.talent_import_pages
    WHERE id = ANY(:page_ids) AND claimed_by = :claimed_by AND status = 'InProgress'
    FOR UPDATE SKIP LOCKED
)

-- name: latest_run_of_correlation
SELECT * FROM chessboard.talent_import_runs
WHERE correlation_id = :correlation_id
ORDER BY started_at DESC
LIMIT 1

-- name: run_of_dagster_run
-- The run a Dagster run works on (its correlation id may be an earlier run's: a CLI that resumed it).
SELECT * FROM chessboard.talent_import_runs
WHERE dagster_run_id = :dagster_run_id
ORDER BY started_at DESC
LIMIT 1

-- name: import_run_named
-- The import run an operator names (`import replay-failed`, the replay's launchpad): by its own id,
-- or by a Dagster run id the UI shows: the import's first run (its correlation id), its latest
-- (dagster_run_id), or the root run of a re-execution (:ids holds both); the newest run wins.
SELECT * FROM chessboard.talent_import_runs
WHERE CAST(id AS text) = ANY(:ids) OR dagster_run_id = ANY(:ids) OR correlation_id = ANY(:ids)
ORDER BY started_at DESC
LIMIT 1

-- name: lock_running_run_of_dagster_run
-- The Running run a Dagster run works on, locked to be ended by someone else than its steps (the
-- run-status sensors): once a later Dagster run resumed it (a retry of a dead run worker), it is
-- none; a resume that comes after waits for this transaction and resumes the ended run.
SELECT * FROM chessboard.talent_import_runs
WHERE dagster_run_id = :dagster_run_id AND status = 'Running'
ORDER BY started_at DESC
LIMIT 1
FOR UPDATE

-- name: latest_run
SELECT * FROM chessboard.talent_import_runs ORDER BY started_at DESC LIMIT 1

-- name: previous_stage_planned
-- The items a stage read in the latest Completed run of the same scopes and mode before run
-- :run_id (a stage-progress line's estimate while the walk goes on).
SELECT (p.stage_counters -> :stage ->> 'planned')::bigint
FROM chessboard.talent_import_runs AS r
JOIN chessboard.talent_import_runs AS p
  ON p.scopes = r.scopes AND p.mode = r.mode AND p.status = 'Completed' AND p.started_at < r.started_at
WHERE r.id = :run_id AND p.stage_counters -> :stage IS NOT NULL
ORDER BY p.finished_at DESC NULLS LAST
LIMIT 1

-- name: developer_names
-- The replica's names of Talent developers (the page lines name the developer of a page).
SELECT external_talent_id::text, name FROM chessboard.developers
WHERE external_talent_id = ANY(CAST(:talent_ids AS uuid[]))

-- name: freeze_developer_partitions
-- The talent_developers partition of each listed developer, frozen at first sight: a developer seen
-- before keeps its key (the :keys of a rename are ignored); its latest name (when the listing has
-- one) is stored beside it.
INSERT INTO chessboard.developer_partitions AS p (developer_id, partition_key, name)
SELECT * FROM unnest(CAST(:developer_ids AS uuid[]), CAST(:keys AS text[]), CAST(:names AS text[]))
ON CONFLICT (developer_id) DO UPDATE SET name = EXCLUDED.name, renamed_at = now()
WHERE EXCLUDED.name <> '' AND p.name IS DISTINCT FROM EXCLUDED.name

-- name: developer_partition_keys
SELECT developer_id::text, partition_key FROM chessboard.developer_partitions
WHERE developer_id = ANY(CAST(:developer_ids AS uuid[]))

-- name: run_by_id
SELECT * FROM chessboard.talent_import_runs WHERE id = :run_id

-- name: insert_run
INSERT INTO chessboard.talent_import_runs
    (id, mode, status, started_at, correlation_id, dry_run, developer_id_filter, project_id_filter,
     page_size, scopes, dagster_run_id, heartbeat_at)
VALUES (:id, :mode, 'Running', now(), :correlation_id, :dry_run, :developer_id_filter,
        :project_id_filter, :page_size, CAST(:scopes AS jsonb), :dagster_run_id, now())
RETURNING *

-- name: resume_run
UPDATE chessboard.talent_import_runs
SET status = 'Running', finished_at = NULL, error = NULL, dagster_run_id = :dagster_run_id,
    heartbeat_at = now(), worker_heartbeat_at = NULL  -- the new Dagster run's worker beats next
WHERE id = :run_id
RETURNING *

-- name: reopen_pages
-- Resume: pages a dead or failed attempt left InProgress or Failed are Pending again; the claim
-- token changes hands, so a straggler of the old attempt cannot mark them Done.
UPDATE chessboard.talent_import_pages
SET status = 'Pending', lease_until = NULL, claim_token = NULL, attempts = 0, heartbeat_at = NULL,
    finished_at = NULL, updated_at = now()
WHERE run_id = :run_id AND status IN ('InProgress', 'Failed')

-- name: delete_pages
DELETE FROM chessboard.talent_import_pages WHERE run_id = :run_id

-- name: delete_dry_run_states
DELETE FROM chessboard.talent_import_dry_run_states WHERE run_id = :run_id

-- name: save_dry_run_state
INSERT INTO chessboard.talent_import_dry_run_states (run_id, stage, state)
VALUES (:run_id, :stage, CAST(:state AS jsonb))
ON CONFLICT (run_id, stage) DO UPDATE SET state = excluded.state

-- name: dry_run_states
SELECT stage, state FROM chessboard.talent_import_dry_run_states WHERE run_id = :run_id

-- name: analyze_filled_tables
-- The planner statistics of the tables an import fills, taken before its recalc requests are due:
-- a bulk load leaves them as they were before it (never analyzed: a few pages), and the recalc's
-- plans on them then scan a whole index per project (docs/talent-initial-import.md#planner-statistics).
-- The lock ANALYZE takes conflicts with no write, only with a VACUUM or another ANALYZE
-- (analyze_lock_timeout bounds that wait).
ANALYZE chessboard.developers, chessboard.projects, chessboard.buildings, chessboard.layout_groups,
        chessboard.layouts, chessboard.property_objects, chessboard.project_recalc_requests,
        chessboard.outbox_messages

-- name: analyze_lock_timeout
-- The longest wait of analyze_filled_tables for its locks, in its transaction (:timeout, e.g. '5s').
SELECT set_config('lock_timeout', :timeout, true)

-- name: finish_run
UPDATE chessboard.talent_import_runs
SET status = :status, finished_at = now(), error = :error
WHERE id = :run_id
RETURNING *

-- name: end_running_run
-- The first process that sees the run end (a failed page, a cancel) ends it; the others find it ended.
UPDATE chessboard.talent_import_runs
SET status = :status, finished_at = now(), error = :error
WHERE id = :run_id AND status = 'Running'
RETURNING *

-- name: sum_stage_counters
-- Per-stage counters summed from the pages into the run row (the pages hold the live counters).
UPDATE chessboard.talent_import_runs AS r
SET stage_counters = COALESCE((
    SELECT jsonb_object_agg(s.stage, jsonb_build_object(
        'planned', s.planned, 'applied', s.applied, 'skipped', s.skipped, 'failed', s.failed,
        'pages', s.pages, 'pagesDone', s.pages_done))
    FROM (
        SELECT stage, sum(items_planned) AS planned, sum(items_applied) AS applied,
               sum(items_skipped) AS skipped, sum(items_failed) AS failed,
               count(*) AS pages, count(*) FILTER (WHERE status = 'Done') AS pages_done
        FROM chessboard.talent_import_pages
        WHERE run_id = r.id
        GROUP BY stage
    ) AS s), '{}'::jsonb)
WHERE r.id = :run_id
RETURNING stage_counters

-- name: last_planned_page
-- Where the walk of (stage, scope) stands: its last recorded page.
SELECT page_no, next_cursor, is_last
FROM chessboard.talent_import_pages
WHERE run_id = :run_id AND stage = :stage AND scope = :scope
ORDER BY page_no DESC
LIMIT 1

-- name: insert_page
-- A planned page; a second walker of the same page (a resume racing a straggler) adds nothing.
INSERT INTO chessboard.talent_import_pages
    (run_id, stage, scope, page_no, cursor, next_cursor, is_last, status, items_planned, planned_by,
     updated_at)
VALUES (:run_id, :stage, :scope, :page_no, :cursor, :next_cursor, :is_last, 'Pending', :items_planned,
        :planned_by, now())
ON CONFLICT (run_id, stage, scope, page_no) DO NOTHING
RETURNING id

-- name: claim_page
-- The first Pending page of the stage by page_no, or one whose claim is dead: its lease expired, or
-- its claimant stopped renewing the heartbeat :dead_seconds ago. Rows other workers hold are
-- skipped, never waited for (docs/talent-initial-import.md#pages-and-leases).
UPDATE chessboard.talent_import_pages AS p
SET status = 'InProgress', lease_until = now() + make_interval(secs => :lease_seconds),
    claim_token = :claim_token, claimed_by = :claimed_by, claimed_at = now(), heartbeat_at = now(),
    updated_at = now()
WHERE p.id = (
    SELECT c.id
    FROM chessboard.talent_import_pages AS c
    WHERE c.run_id = :run_id AND c.stage = :stage
      AND (c.status = 'Pending'
           OR (c.status = 'InProgress'
               AND (c.lease_until < now()
                    OR c.heartbeat_at < now() - make_interval(secs => :dead_seconds))))
    ORDER BY c.page_no, c.scope
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
RETURNING p.id, p.scope, p.page_no, p.cursor, p.attempts,
          -- a page another process walked: its staged items come with the claim (the walking
          -- process holds them in memory)
          CASE WHEN p.planned_by IS DISTINCT FROM :claimed_by THEN (
              SELECT s.items FROM chessboard.talent_import_staged_pages AS s
              WHERE s.run_id = p.run_id AND s.stage = p.stage AND s.page_id = p.id) END AS staged_items

-- name: claimed_pages
SELECT id FROM chessboard.talent_import_pages WHERE id = ANY(:page_ids) AND status <> 'Pending'

-- name: hold_claimed_page
-- First statement of a page transaction: the page is still this worker's claim (locks the row,
-- so nobody re-claims it while the transaction runs).
SELECT id
FROM chessboard.talent_import_pages
WHERE id = :page_id AND claim_token = :claim_token AND status = 'InProgress'
FOR UPDATE

-- name: complete_page
-- Done, and its staged items gone with it (docs/talent-initial-import.md#pages-read-once).
WITH unstaged AS (
    DELETE FROM chessboard.talent_import_staged_pages
    WHERE run_id = :run_id AND stage = :stage AND page_id = :page_id
)
UPDATE chessboard.talent_import_pages
SET status = 'Done', lease_until = NULL, items_planned = :planned, items_applied = :applied,
    items_skipped = :skipped, items_failed = :failed, tenant_counters = CAST(:tenant_counters AS jsonb),
    items_read_from = :read_from, last_error = NULL, finished_at = now(), updated_at = now()
WHERE id = :page_id

-- name: stage_page
-- The items the walker read of a page it recorded, for a claimant in another process.
INSERT INTO chessboard.talent_import_staged_pages (run_id, stage, page_id, items)
VALUES (:run_id, :stage, :page_id, :items)
ON CONFLICT (run_id, stage, page_id) DO NOTHING

-- name: staged_page
SELECT items
FROM chessboard.talent_import_staged_pages
WHERE run_id = :run_id AND stage = :stage AND page_id = :page_id

-- name: delete_staged_pages
-- The run ended: what it staged goes (a resumed run reads its remaining pages by cursor).
DELETE FROM chessboard.talent_import_staged_pages WHERE run_id = :run_id

-- name: stage_tenant_counters
-- Per developer (tenant = its PIN id; "" = items whose developer is not known) of one stage of a
-- run: applied / skipped / failed summed over its Done pages (the Dagster partitions' figures).
SELECT t.key AS tenant, sum((t.value ->> 0)::bigint) AS applied, sum((t.value ->> 1)::bigint) AS skipped,
       sum((t.value ->> 2)::bigint) AS failed
FROM chessboard.talent_import_pages AS p, jsonb_each(p.tenant_counters) AS t
WHERE p.run_id = :run_id AND p.stage = :stage AND p.status = 'Done'
GROUP BY t.key

-- name: record_page_failure
-- A failed attempt, in its own transaction: the page stays InProgress and is re-claimed when the
-- (shortened) lease runs out (no heartbeat: nobody works on it meanwhile); a permanent failure
-- marks it Failed.
UPDATE chessboard.talent_import_pages
SET attempts = attempts + 1, last_error = left(:error, 1024), status = :status,
    lease_until = now() + make_interval(secs => :retry_seconds), heartbeat_at = NULL,
    finished_at = CASE WHEN :status = 'Failed' THEN now() END, updated_at = now()
WHERE id = :page_id AND claim_token = :claim_token
RETURNING attempts

-- name: release_page
-- A claimed page given back unprocessed (cancellation): Pending again, no attempt counted.
UPDATE chessboard.talent_import_pages
SET status = 'Pending', lease_until = NULL, claim_token = NULL, heartbeat_at = NULL, updated_at = now()
WHERE id = :page_id AND claim_token = :claim_token AND status = 'InProgress'

-- name: stage_state
-- The stage barrier: how many pages are not Done, how many failed for good, and which walks ended;
-- the stage's wall time from its first claim to its last page finished, whatever process did them.
SELECT count(*) AS pages,
       count(*) FILTER (WHERE status = 'Done') AS done,
       count(*) FILTER (WHERE status = 'Failed') AS failed,
       COALESCE(max(attempts) FILTER (WHERE status <> 'Done'), 0) AS max_attempts,
       COALESCE(array_agg(DISTINCT scope) FILTER (WHERE is_last), '{}') AS walked_scopes,
       COALESCE(extract(epoch FROM max(finished_at) - min(claimed_at)), 0)::float AS span_seconds
FROM chessboard.talent_import_pages
WHERE run_id = :run_id AND stage = :stage

-- name: progress
-- Pages and items per stage of a run (progress bar, Dagster metadata).
SELECT stage, count(*) AS pages, count(*) FILTER (WHERE status = 'Done') AS done,
       bool_or(is_last) AS walked, sum(items_planned) AS planned,
       sum(items_applied + items_skipped + items_failed) AS processed
FROM chessboard.talent_import_pages
WHERE run_id = :run_id
GROUP BY stage

-- name: stuck_runs
-- Running imports with no page Done for :stuck_seconds
-- (docs/talent-initial-import.md#metrics-logs-and-alerts).
SELECT r.id, r.correlation_id, r.started_at,
       COALESCE(max(p.updated_at) FILTER (WHERE p.status = 'Done'), r.started_at) AS last_progress_at
FROM chessboard.talent_import_runs AS r
LEFT JOIN chessboard.talent_import_pages AS p ON p.run_id = r.id
WHERE r.status = 'Running'
GROUP BY r.id
HAVING COALESCE(max(p.updated_at) FILTER (WHERE p.status = 'Done'), r.started_at)
       < now() - make_interval(secs => :stuck_seconds)

-- name: failed_items_of_run
SELECT stage, error_code, count(*) AS items
FROM chessboard.talent_import_failed_items
WHERE run_id = :run_id
GROUP BY stage, error_code
ORDER BY stage, error_code

-- name: quarantined_items
-- `import replay-failed`: the quarantined items of a stage (of one import run, or every run's).
SELECT id, run_id, external_id, payload FROM chessboard.talent_import_failed_items
WHERE stage = :stage AND external_id IS NOT NULL
  AND (CAST(:run_id AS uuid) IS NULL OR run_id = CAST(:run_id AS uuid))
ORDER BY id

-- name: delete_quarantined_items
-- The quarantine rows of the items a replay page read again, in that page's transaction.
DELETE FROM chessboard.talent_import_failed_items WHERE id = ANY(:ids)

-- name: latest_finished_run
SELECT * FROM chessboard.talent_import_runs
WHERE status <> 'Running'
ORDER BY finished_at DESC NULLS LAST
LIMIT 1

-- name: page_cursors
-- The cursors of a run's pages, per stage (TopicReplay's handover reads where each partition ended).
SELECT stage, cursor
FROM chessboard.talent_import_pages
WHERE run_id = :run_id AND cursor IS NOT NULL
ORDER BY stage, page_no

-- name: stage_figures
-- What the pages of a stage finished since :since say (this Dagster run's share of a resumed run):
-- pages, items, the p99 of their times from claim to Done, and how many processes claimed them.
SELECT count(*) AS pages,
       COALESCE(sum(items_applied + items_skipped + items_failed), 0) AS items,
       COALESCE(percentile_cont(0.99) WITHIN GROUP (
           ORDER BY extract(epoch FROM finished_at - claimed_at) * 1000), 0) AS page_p99_ms,
       count(DISTINCT claimed_by) AS processes,
       COALESCE(extract(epoch FROM max(finished_at) - min(claimed_at)), 0) AS seconds
FROM chessboard.talent_import_pages
WHERE run_id = :run_id AND stage = :stage AND status = 'Done' AND finished_at >= :since

-- Analytics over the replica (docs/store.md#analytics).

-- name: inventory_rows
-- Everything one day of project_inventory_daily needs, in one read (COPY ... TO STDOUT, CSV):
-- 'p' rows: live, non-archived projects, numbered n; 'o' rows: their live property objects, a free
-- object's price as integer units and scale (price = units * 10^-scale); 'l' rows: their live
-- layouts with rooms. Objects belong to the project of their project_id, as in the aggregates.
WITH live AS (
    SELECT id, tenant_id, name, row_number() OVER (ORDER BY id) AS n
    FROM chessboard.projects
    WHERE deleted_at IS NULL AND status <> 'Archived'
)
SELECT 'p' AS kind, n, id AS project_id, tenant_id, name,
       NULL::text AS status, NULL::text AS price_units, NULL::int AS price_scale, NULL::int AS rooms
FROM live
UNION ALL
SELECT 'o', live.n, NULL, NULL, NULL, o.status,
       -- the digits without the point: cheaper than price * 10^scale (numeric power)
       CASE WHEN o.status = 'Free' THEN replace(o.price::text, '.', '') END,
       CASE WHEN o.status = 'Free' THEN scale(o.price) END,
       NULL
FROM chessboard.property_objects o
JOIN live ON live.id = o.project_id
WHERE o.deleted_at IS NULL
UNION ALL
SELECT 'l', live.n, NULL, NULL, NULL, NULL, NULL, NULL, l.rooms
FROM chessboard.layouts l
JOIN live ON live.id = l.project_id
WHERE l.deleted_at IS NULL

-- name: pending_recalc_projects
-- Projects with a row in the recalc queue: their divergences are pending, not drift
-- (docs/project-aggregates-recalc.md#audit).
SELECT project_id FROM chessboard.project_recalc_requests

-- name: delete_inventory_day
DELETE FROM chessboard_analytics.project_inventory_daily WHERE day = :day

-- name: copy_inventory_day
COPY chessboard_analytics.project_inventory_daily (project_id, day, tenant_id, free_count, total_count,
    sold_count, reserved_count, booked_count, hidden_count, price_min, price_max, price_median,
    free_value, layouts_by_rooms, computed_at) FROM STDIN WITH (FORMAT csv)

-- name: inventory_day
SELECT project_id, day, tenant_id, free_count, total_count, sold_count, reserved_count, booked_count,
       hidden_count, price_min, price_max, price_median, free_value, layouts_by_rooms, computed_at
FROM chessboard_analytics.project_inventory_daily
WHERE day = :day
ORDER BY project_id

-- name: inventory_day_recorded_at
-- When a day's stored rows were computed (one materialization writes them all): a past day is
-- kept from them only when that was on the day (analytics/inventory.py day_source).
SELECT max(computed_at) FROM chessboard_analytics.project_inventory_daily WHERE day = :day

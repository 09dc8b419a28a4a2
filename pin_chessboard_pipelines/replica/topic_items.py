"""Applying items read from the Talent topics (talent/topic_reader.py): snapshots and tombstones in
message order, through the one apply path. Used by TopicReplay pages and by the streaming sync's
poll batches alike."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.replica.apply import (
    ApplyContext,
    ApplyResult,
    apply_snapshots,
    apply_tombstones,
)
from pin_chessboard_pipelines.talent.topic_reader import Item, is_tombstone, source_of


def merge_results(results: Sequence[ApplyResult]) -> ApplyResult:
    merged = ApplyResult()
    for r in results:
        merged.planned += r.planned
        merged.applied += r.applied
        merged.skipped += r.skipped
        merged.failed += r.failed
        merged.touched_projects |= r.touched_projects
        merged.events += r.events
        merged.unknown_enums.extend(r.unknown_enums)
        merged.quarantined.extend(r.quarantined)
        merged.created += r.created
        merged.unresolved_references.extend(r.unresolved_references)
        for tenant, counts in r.by_tenant.items():
            total = merged.by_tenant.setdefault(tenant, [0, 0, 0])
            for outcome, count in enumerate(counts):
                total[outcome] += count
    return merged


def apply_topic_items(conn: Connection, entity: str, items: Sequence[Item], ctx: ApplyContext) -> ApplyResult:
    """Applies topic items of one entity in message order, in the caller's transaction: runs of
    snapshots through apply_snapshots, runs of tombstones through apply_tombstones."""
    results: list[ApplyResult] = []
    run: list[Item] = []
    for item in items:
        if run and is_tombstone(run[0]) != is_tombstone(item):
            results.append(_apply_run(conn, entity, run, ctx))
            run = []
        run.append(item)
    if run:
        results.append(_apply_run(conn, entity, run, ctx))
    return merge_results(results) if len(results) != 1 else results[0]


def _apply_run(conn: Connection, entity: str, run: list[Item], ctx: ApplyContext) -> ApplyResult:
    if is_tombstone(run[0]):
        return apply_tombstones(conn, entity, [item["id"] for item in run], ctx, [source_of(i) for i in run])
    return apply_snapshots(conn, entity, run, ctx)


__all__ = ["apply_topic_items", "merge_results"]

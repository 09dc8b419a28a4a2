"""handbook-sync (HR-6): the handbook topics into the handbook replica, and the republish of the
projects of a renamed region or city (consumer.py; docs/store.md#handbook-sync)."""

from pin_chessboard_pipelines.handbook_sync.consumer import (
    HandbookSync,
    HandbookSyncResult,
    check_handbook_topics,
    handbook_group_lag,
    handbook_sync_running,
    republish_pending,
)

__all__ = [
    "HandbookSync",
    "HandbookSyncResult",
    "check_handbook_topics",
    "handbook_group_lag",
    "handbook_sync_running",
    "republish_pending",
]

"""The streaming side of the Talent topics: the consumer group that owns their offsets and the lock
that keeps one consumer at a time. Topic names come from entities.py (`Entity.topic`)."""

from __future__ import annotations

from pin_chessboard_pipelines.store.lock import AdvisoryLock

CONSUMER_GROUP = "pin-chessboard-talent-sync"
TALENT_SYNC_LOCK = AdvisoryLock("Pin:lock:job:chessboard-talent-sync")  # one consumer at a time

"""talent-chessboard-sync: the streaming consumer of the six Talent topics (consumer.py)."""

from pin_chessboard_pipelines.retry import sync_policy
from pin_chessboard_pipelines.talent.topic_reader import check_topics, group_lag, sync_running
from pin_chessboard_pipelines.talent_sync.consumer import SYNC_LOCK_HELD, TalentSync
from pin_chessboard_pipelines.talent_sync.result import SyncResult

__all__ = [
    "SYNC_LOCK_HELD",
    "SyncResult",
    "TalentSync",
    "check_topics",
    "group_lag",
    "sync_policy",
    "sync_running",
]

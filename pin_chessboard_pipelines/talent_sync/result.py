"""What one talent-sync run did: counters for the run's metadata, its log line and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field

from pin_chessboard_pipelines.events.consume_loop import BatchCounters
from pin_chessboard_pipelines.replica.apply import ApplyResult
from pin_chessboard_pipelines.stopper import StopReason


@dataclass
class SyncResult(BatchCounters):
    events: int = 0
    held: int = 0  # times a child topic waited for its parents (stage barrier)
    stopped: StopReason | None = None  # DONE (idle) | TIME_BUDGET | CANCELLED
    stages: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, stage: str, result: ApplyResult, tombstones: int) -> None:
        self.applied += result.applied
        self.skipped += result.skipped
        self.failed += result.failed
        self.events += result.events
        self.tombstones += tombstones
        counters = self.stages.setdefault(stage, {"planned": 0, "applied": 0, "skipped": 0, "failed": 0})
        for name in counters:
            counters[name] += getattr(result, name)

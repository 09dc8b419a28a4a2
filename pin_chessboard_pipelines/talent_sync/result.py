"""What one talent-sync run did: counters for the run's metadata, its log line and the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pin_chessboard_pipelines.observability.logs import counter_fields, counters
from pin_chessboard_pipelines.replica.apply import ApplyResult
from pin_chessboard_pipelines.stopper import StopReason


@dataclass
class SyncResult:
    batches: int = 0
    messages: int = 0
    tombstones: int = 0
    applied: int = 0
    skipped: int = 0
    failed: int = 0  # quarantined
    events: int = 0
    published: int = 0  # outbox rows the fast path relayed
    retries: int = 0  # batches rolled back and read again
    dead_letters: int = 0  # messages written to the dead-letter topic (docs/events.md#dead-letters)
    held: int = 0  # times a child topic waited for its parents (stage barrier)
    seconds: float = 0.0
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

    @property
    def messages_per_second(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return counters(self, after={"seconds": {"messagesPerSecond": round(self.messages_per_second, 1)}})

    def log_fields(self) -> dict[str, Any]:
        """The counters as the Key=value fields of a log line (stages left out)."""
        return counter_fields(self.as_dict(), "stages")

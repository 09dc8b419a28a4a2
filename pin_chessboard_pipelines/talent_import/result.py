"""TalentInitialImportResult (docs/talent-initial-import.md#result): per-stage counters and the JSON line."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pin_chessboard_pipelines.entities import STAGE_NAMES
from pin_chessboard_pipelines.observability.logs import counters
from pin_chessboard_pipelines.replica.context import ItemCounts

COUNTERS = ("planned", "applied", "skipped", "failed")


def item_fields(counts: ItemCounts) -> dict[str, int]:
    """ItemsApplied, ItemsSkipped and ItemsFailed of an import log line."""
    return {f"Items{name.capitalize()}": getattr(counts, name) for name in COUNTERS[1:]}


@dataclass
class StageCounters(ItemCounts):
    """A stage's item counters as the run row and the result line carry them."""

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTERS}

    @staticmethod
    def from_mapping(values: Mapping[str, Any] | None) -> StageCounters:
        values = values or {}
        return StageCounters(**{name: int(values.get(name) or 0) for name in COUNTERS})


def stages_from_mapping(values: Mapping[str, Any] | None) -> dict[str, StageCounters]:
    """Counters of all six stages, zeros where a stage has none (e.g. talent_import_runs.stage_counters)."""
    values = values or {}
    return {name: StageCounters.from_mapping(values.get(name)) for name in STAGE_NAMES}


@dataclass
class TalentInitialImportResult:
    run_id: str
    correlation_id: str
    mode: str
    status: str
    dry_run: bool
    duration_seconds: float
    stages: dict[str, StageCounters] = field(default_factory=lambda: stages_from_mapping(None))

    def to_dict(self) -> dict[str, Any]:
        return {**counters(self), "stages": {name: self.stages[name].to_dict() for name in STAGE_NAMES}}

    def to_json(self) -> str:
        """One line, as the last line of `pin-chessboard import`'s stdout."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(", ", ": "))

    @property
    def totals(self) -> StageCounters:
        total = StageCounters()
        for stage in self.stages.values():
            for name in COUNTERS:
                setattr(total, name, getattr(total, name) + getattr(stage, name))
        return total

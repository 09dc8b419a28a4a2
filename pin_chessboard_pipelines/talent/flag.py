"""The feature flag `chessboard.talent-sync.enabled` (CHESSBOARD_TALENT_SYNC_ENABLED): it gates both
jobs that read Talent, the import and the streaming sync. Read here only; each entry point (CLI
command, Dagster asset/op, sensor) asks before it starts anything."""

from __future__ import annotations

from pin_chessboard_pipelines.errors import IMPORT_DISABLED, Refused
from pin_chessboard_pipelines.settings import Settings

FLAG = "chessboard.talent-sync.enabled"


def talent_sync_disabled(settings: Settings) -> Refused | None:
    """The refusal (CHESSBOARD_IMPORT_DISABLED) when the flag is off, else None."""
    if settings.talent_sync_enabled:
        return None
    return Refused(f"feature flag {FLAG} is off", IMPORT_DISABLED)


def require_talent_sync_enabled(settings: Settings) -> None:
    """Raises the refusal when the flag is off."""
    refusal = talent_sync_disabled(settings)
    if refusal is not None:
        raise refusal

"""The planner statistics an import run leaves (docs/talent-initial-import.md#planner-statistics): a
bulk load leaves PostgreSQL's figures as they were before it, so the run refreshes those of the
tables it filled before its recalc requests come due."""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.talent_import import runs

log = logging.getLogger("pin_chessboard_pipelines.talent_import")


def refresh_statistics(engine: Engine, fields: dict[str, Any]) -> None:
    """ANALYZE of the tables an import fills, logged as `import-analyzed` with its seconds. Best
    effort: a failure is one warning line, `import-analyze-failed`; autovacuum takes them later."""
    started = time.monotonic()
    try:
        with engine.begin() as conn:
            runs.analyze_filled_tables(conn)
    except Exception as error:  # noqa: BLE001 - statistics are an optimisation; the run ends as it is
        log_event(log, logging.WARNING, "import-analyze-failed", **fields, Error=repr(error_line(error)))
        return
    log_event(log, logging.INFO, "import-analyzed", **fields, Seconds=f"{time.monotonic() - started:.2f}")

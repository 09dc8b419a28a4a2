"""Progress of an import, drawn from talent_import_pages: a bar on a terminal (stderr) and
`stage-progress` log lines while a stage runs (the Dagster run's log)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO
from uuid import UUID

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.entities import STAGE_NAMES
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.talent_import import runs

WIDTH = 24
log = logging.getLogger("pin_chessboard_pipelines.talent_import")


def render(progress: dict[str, runs.Row]) -> str:
    """One line: the stage being worked on, its pages Done / planned and the items processed."""
    done_stages = 0
    current = None
    for name in STAGE_NAMES:
        row = progress.get(name)
        if row is not None and row["walked"] and row["done"] == row["pages"]:
            done_stages += 1
            continue
        current = name
        break
    if current is None:
        return f"import [{'#' * WIDTH}] 6/6 stages done"
    row = progress.get(current)
    pages, done = (row["pages"], row["done"]) if row is not None else (0, 0)
    filled = int(WIDTH * done / pages) if pages else 0
    planning = "" if row is not None and row["walked"] else "+"  # still walking the source
    items = int(row["processed"] or 0) if row is not None else 0
    return (
        f"import [{'#' * filled}{'.' * (WIDTH - filled)}] stage {done_stages + 1}/6 {current}: "
        f"{done}/{pages}{planning} pages, {items} items"
    )


class ProgressBar:
    """Redraws the line every `every` seconds on a TTY; does nothing otherwise."""

    def __init__(self, engine: Engine, run_id: UUID, stream: TextIO = sys.stderr, every: float = 0.5) -> None:
        self.engine, self.run_id, self.stream, self.every = engine, run_id, stream, every
        self.enabled = stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="import-progress", daemon=True)

    def __enter__(self) -> ProgressBar:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self._stop.set()
            self._thread.join()
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._draw()

    def _draw(self) -> None:
        try:
            with self.engine.connect() as conn:
                line = render(runs.progress(conn, self.run_id))
        except Exception:  # noqa: BLE001 - the bar never breaks the import
            return
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()


PROGRESS_SECONDS = 5.0  # a stage that runs longer logs a stage-progress line this often


ETA_PLAN = "plan"  # the walk ended: the stage's items are known
ETA_PREVIOUS_RUN = "previous-run"  # still walking: the last Completed run of the same scopes read this many
ETA_NONE = "none"


@dataclass(frozen=True)
class Eta:
    """Seconds left in a stage at this run's rate, and what the total it assumes rests on."""

    seconds: float | None  # None: cannot be estimated yet
    basis: str  # ETA_PLAN, ETA_PREVIOUS_RUN or ETA_NONE

    def fields(self) -> dict[str, str]:
        """`EtaSeconds=~120 EtaBasis=plan`: "~" says it is an estimate (the rate changes)."""
        shown = "unknown" if self.seconds is None else f"~{self.seconds:.0f}"
        return {"EtaSeconds": shown, "EtaBasis": self.basis}


def estimate_eta(
    *, walked: bool, planned: int, processed: int, rate: float, previous_planned: int | None
) -> Eta:
    """Time left in a stage: (items in the stage - items processed) / items per second.

    The items in the stage are the plan once the walk ended; while it goes on the plan only grows,
    so the previous Completed run of the same scopes stands in for it (never less than what the walk
    planned so far); without either, or before a first item at a rate, it is unknown."""
    if rate <= 0:
        return Eta(None, ETA_NONE)
    if walked:
        total, basis = planned, ETA_PLAN
    elif previous_planned:
        total, basis = max(previous_planned, planned), ETA_PREVIOUS_RUN
    else:
        return Eta(None, ETA_NONE)
    return Eta(max(0, total - processed) / rate, basis)


def progress_fields(
    row: runs.Row | None, items_before: int, elapsed: float, previous_planned: int | None = None
) -> dict[str, str | int]:
    """The figures of a stage-progress line: pages Done / planned ("+": the walk goes on), the items
    this run processed, its rate and the time left at that rate (estimate_eta; pages of resumed
    runs done before are not this run's work)."""
    pages, done = (int(row["pages"]), int(row["done"])) if row is not None else (0, 0)
    walked = bool(row["walked"]) if row is not None else False
    processed = int(row["processed"] or 0) if row is not None else 0
    planned = int(row["planned"] or 0) if row is not None else 0
    items = max(0, processed - items_before)
    rate = items / elapsed if elapsed > 0 else 0.0
    eta = estimate_eta(
        walked=walked, planned=planned, processed=processed, rate=rate, previous_planned=previous_planned
    )
    return {
        "Pages": f"{done}/{pages}{'' if walked else '+'}",
        "Items": items,
        "ItemsPerSecond": f"{rate:.0f}",
        **eta.fields(),
    }


class StageProgress:
    """While a stage runs: a `stage-progress` line every `every` seconds (after the first `every`),
    so a long stage is not silent between its stage-planned and stage-completed lines."""

    def __init__(
        self,
        engine: Engine,
        run_id: UUID,
        stage: str,
        fields: dict[str, object],
        every: float = PROGRESS_SECONDS,
    ) -> None:
        self.engine, self.run_id, self.stage, self.fields, self.every = engine, run_id, stage, fields, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"import-{stage}-progress", daemon=True)
        self._items_before = 0
        self._previous_planned: int | None = None
        self._started = 0.0
        self.items = 0  # processed by this run (pages of an earlier run of a resumed import excluded)
        self.seconds = 0.0

    def __enter__(self) -> StageProgress:
        row = self._row_now()
        self._items_before = int(row["processed"] or 0) if row is not None else 0
        try:
            with self.engine.connect() as conn:
                self._previous_planned = runs.previous_stage_planned(conn, self.run_id, self.stage)
        except Exception:  # noqa: BLE001 - no estimate from a previous run: progress never breaks the stage
            self._previous_planned = None
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seconds = time.monotonic() - self._started
        try:
            row = self._row_now()
        except Exception:  # noqa: BLE001 - the figures of a stage that failed on the store are not needed
            return
        self.items = max(0, (int(row["processed"] or 0) if row is not None else 0) - self._items_before)

    @property
    def items_per_second(self) -> float:
        """Items this run processed in the stage per second of this run's stage time."""
        return self.items / self.seconds if self.seconds > 0 else 0.0

    def _row_now(self) -> runs.Row | None:
        with self.engine.connect() as conn:
            return runs.progress(conn, self.run_id).get(self.stage)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                figures = progress_fields(
                    self._row_now(),
                    self._items_before,
                    time.monotonic() - self._started,
                    self._previous_planned,
                )
            except Exception:  # noqa: BLE001 - progress never breaks the stage
                continue
            log_event(log, logging.INFO, "stage-progress", **self.fields, **figures)

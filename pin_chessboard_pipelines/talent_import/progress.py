"""A progress bar of an import on a terminal (stderr), drawn from talent_import_pages."""

from __future__ import annotations

import sys
import threading
from typing import TextIO
from uuid import UUID

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.entities import STAGE_NAMES
from pin_chessboard_pipelines.talent_import import runs

WIDTH = 24


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
        except Exception:  # the bar never breaks the import
            return
        self.stream.write("\r\x1b[2K" + line)
        self.stream.flush()

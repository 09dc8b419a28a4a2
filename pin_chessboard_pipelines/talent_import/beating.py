"""A thread that beats: the import's heartbeats (the run worker's, a stage's workers')."""

from __future__ import annotations

import logging
import threading
from typing import Any, Self

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.observability.logs import log_event

log = logging.getLogger("pin_chessboard_pipelines.talent_import")


class Beating:
    """A daemon thread that beats at once (a step that lives for a moment still shows the run
    alive), then every `seconds` until stopped or a beat says to stop; a beat that fails (the
    store restarting) is logged as `failed_event` with `log_fields()` and tried again at the next."""

    failed_event = "heartbeat-failed"

    def __init__(self, seconds: float, name: str) -> None:
        self.seconds = seconds
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def beat_once(self) -> bool:
        """One beat; False: stop beating."""
        raise NotImplementedError

    def log_fields(self) -> dict[str, Any]:
        return {}

    def start(self) -> Self:
        self._thread.start()
        return self

    def __enter__(self) -> Self:
        return self.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while True:
            try:
                going = self.beat_once()
            except Exception as error:  # noqa: BLE001 - the store restarting: the next beat tries again
                log_event(
                    log,
                    logging.WARNING,
                    self.failed_event,
                    **self.log_fields(),
                    Error=repr(error_line(error)),
                )
                going = True
            if not going or self._done.wait(self.seconds):
                return

"""The walker's items handed to this process's page workers in memory (the store has them staged too)
(docs/talent-initial-import.md#pages-and-leases)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class PageCache:
    """Items the walker read, handed to this process's workers by page id (bounded: backpressure).

    A full cache first drops the pages other processes claimed meanwhile (`claimed_elsewhere`), then
    waits for this process's workers; the oldest entry goes after `evict_after` seconds at the latest.
    """

    def __init__(self, capacity: int, evict_after: float = 10.0) -> None:
        self.capacity = max(1, capacity)
        self.evict_after = evict_after
        self._items: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._cond = threading.Condition()

    def put(
        self,
        page_id: int,
        items: list[dict[str, Any]],
        stopping: Callable[[], bool],
        claimed_elsewhere: Callable[[list[int]], set[int]],
    ) -> None:
        deadline = time.monotonic() + self.evict_after
        with self._cond:
            while len(self._items) >= self.capacity and not stopping():
                ids = list(self._items)
                self._cond.release()  # no lock held while asking the store
                try:
                    stale = claimed_elsewhere(ids)
                finally:
                    self._cond.acquire()
                for stale_id in stale:
                    self._items.pop(stale_id, None)
                if len(self._items) < self.capacity:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._items.popitem(last=False)  # its claimer reads the staged items
                    break
                self._cond.wait(min(remaining, 0.2))
            self._items[page_id] = items

    def take(self, page_id: int) -> list[dict[str, Any]] | None:
        with self._cond:
            items = self._items.pop(page_id, None)
            self._cond.notify_all()
            return items

"""What every import source is: the Source protocol and the planned page.

Planning walks the source (`plan_pages`), page by page, and the walk's items are staged with each
page; a page is fetched again by its cursor (`fetch_page`) only when nothing is staged for it
(docs/talent-initial-import.md#pages-read-once).
ApiPull (api_pull.py) pages by the API's cursors, TopicReplay (topic_replay.py) by offset ranges.

Errors are the Talent client's: TalentTransientError (retry the page later), TalentPermanentError
(the page fails), TalentCancelled (should_stop() asked to stop); an unavailable source is refused
by check_available with CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.talent_import.request import ImportMode, Scope

Item = dict[str, Any]


@dataclass(frozen=True)
class PlannedPage:
    cursor: str | None  # None = the first page
    next_cursor: str | None  # where the walk goes on; None = this is the last page
    items: list[Item] | None = None  # the items the walk read, when it read them


class ImportSource(Protocol):
    """A source may also carry `apply` (apply_snapshots' signature): the import applies its pages
    with it (TopicReplay pages hold tombstones); otherwise with replica.apply.apply_snapshots."""

    mode: ImportMode

    def check_available(self) -> None:
        """Raises Refused(CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE) when the source cannot be read."""

    def plan_pages(
        self, stage: Entity, scope: Scope, *, page_size: int, start: str | None = None
    ) -> Iterator[PlannedPage]:
        """The pages of a stage's listing in order, from the page at cursor `start` (None = the first)."""

    def fetch_page(self, stage: Entity, cursor: str | None, scope: Scope, *, page_size: int) -> list[Item]:
        """The items of the page at `cursor` of a walk with this page size."""

    def developer_ids(self, project_id: str | None = None) -> list[str]:
        """Talent developer ids (all, or the developer of one project): the partitions of the import."""

    def developers(self, project_id: str | None = None) -> list[tuple[str, str]]:
        """(Talent id, name) of the same developers: the partition keys carry the name."""

    def close(self) -> None: ...


__all__ = ["ImportSource", "Item", "PlannedPage"]


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class PerThread(Generic[C]):
    """A source's connections (API clients, Kafka consumers): one per worker thread, made on the
    thread's first `get`; `close` closes every one made."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._local = threading.local()
        self._made: list[C] = []
        self._lock = threading.Lock()

    def get(self) -> C:
        made: C | None = getattr(self._local, "made", None)
        if made is None:
            made = self._local.made = self._make()
            with self._lock:
                self._made.append(made)
        return made

    def close(self) -> None:
        with self._lock:
            made, self._made = self._made, []
        for each in made:
            each.close()

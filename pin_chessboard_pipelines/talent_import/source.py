"""Where the import reads Talent from: the Source protocol, its ApiPull implementation, make_source.

Planning walks the source's cursors (`plan_pages`), page by page; a page is fetched again by its
cursor (`fetch_page`) when it is processed by a worker that does not hold the items of the walk,
which is safe because the order of a listing is stable for a cursor (talent-source.md).
TopicReplay (talent/topic_source.py) implements the same protocol with offset ranges as cursors.

Errors are the Talent client's: TalentTransientError (retry the page later), TalentPermanentError
(the page fails), TalentCancelled (should_stop() asked to stop); an unavailable source is refused
by check_available with CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import IMPORT_SOURCE_UNAVAILABLE, Refused
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.talent.client import (
    MAX_PAGE_LIMIT,
    TalentApiClient,
    TalentSourceError,
    TalentSourceUnavailable,
)
from pin_chessboard_pipelines.talent.topics import DEVELOPERS, TalentStage
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
        self, stage: TalentStage, scope: Scope, *, page_size: int, start: str | None = None
    ) -> Iterator[PlannedPage]:
        """The pages of a stage's listing in order, from the page at cursor `start` (None = the first)."""

    def fetch_page(
        self, stage: TalentStage, cursor: str | None, scope: Scope, *, page_size: int
    ) -> list[Item]:
        """The items of the page at `cursor` of a walk with this page size."""

    def developer_ids(self, project_id: str | None = None) -> list[str]:
        """Talent developer ids (all, or the developer of one project): the partitions of the import."""

    def close(self) -> None: ...


class ApiPullSource:
    """The Talent HTTP API (talent-source.md, "HTTP API (ApiPull)"); one keep-alive client per thread."""

    mode = ImportMode.API_PULL

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        should_stop: Callable[[], bool] | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self.base_url = base_url
        self._token = token
        self._should_stop = should_stop
        self._client_options = dict(client_options or {})
        self._local = threading.local()
        self._clients: list[TalentApiClient] = []
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ApiPullSource({self.base_url!r})"

    def _client(self) -> TalentApiClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = TalentApiClient(
                self.base_url, self._token, should_stop=self._should_stop, **self._client_options
            )
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def check_available(self) -> None:
        try:
            self._client().health()
        except TalentSourceUnavailable as e:
            raise Refused(str(e), IMPORT_SOURCE_UNAVAILABLE) from None

    def plan_pages(
        self, stage: TalentStage, scope: Scope, *, page_size: int, start: str | None = None
    ) -> Iterator[PlannedPage]:
        cursor = start
        while True:
            page = self._client().list_page(
                stage.collection, cursor, page_size, scope.developer_id, scope.project_id
            )
            yield PlannedPage(cursor, page.next_cursor, page.items)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def fetch_page(
        self, stage: TalentStage, cursor: str | None, scope: Scope, *, page_size: int
    ) -> list[Item]:
        return (
            self._client()
            .list_page(stage.collection, cursor, page_size, scope.developer_id, scope.project_id)
            .items
        )

    def developer_ids(self, project_id: str | None = None) -> list[str]:
        ids: list[str] = []
        for page in self.plan_pages(DEVELOPERS, Scope(project_id=project_id), page_size=MAX_PAGE_LIMIT):
            ids.extend(str(item["id"]) for item in page.items or () if isinstance(item.get("id"), str))
        return ids

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()


def make_source(
    mode: ImportMode,
    settings: Settings,
    *,
    should_stop: Callable[[], bool] | None = None,
    dry_run: bool = False,
    engine: Engine | None = None,
    client_options: dict[str, Any] | None = None,
) -> ImportSource:
    """The source of a mode: the Talent API, or the compacted Talent topics (talent/topic_source.py)."""
    if mode == ImportMode.API_PULL:
        return ApiPullSource(
            settings.talent_api_url,
            settings.talent_api_token,
            should_stop=should_stop,
            client_options=client_options,
        )
    from pin_chessboard_pipelines.talent.topic_source import TopicReplaySource

    # A DryRun writes nothing, on Kafka either: the consumer group's offsets stay where they are.
    return TopicReplaySource(
        settings.kafka_bootstrap_servers, should_stop=should_stop, reset_offsets=not dry_run, engine=engine
    )


__all__ = ["ApiPullSource", "ImportSource", "PlannedPage", "TalentSourceError", "make_source"]

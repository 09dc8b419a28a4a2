"""ApiPull: the import reads the Talent HTTP API (docs/talent-source.md#http-api).

Planning walks the listing's cursors page by page; a page with nothing staged (a crash emptied
the staging, a resumed run) is fetched again by its cursor, which is safe because the order of a
listing is stable for a cursor (docs/talent-source.md#http-api).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pin_chessboard_pipelines.entities import DEVELOPER, Entity
from pin_chessboard_pipelines.errors import IMPORT_SOURCE_UNAVAILABLE, Refused, TalentSourceUnavailable
from pin_chessboard_pipelines.talent.client import MAX_PAGE_LIMIT, TalentApiClient
from pin_chessboard_pipelines.talent_import.request import ImportMode, Scope
from pin_chessboard_pipelines.talent_import.sources.base import Item, PerThread, PlannedPage


class ApiPullSource:
    """The Talent HTTP API (docs/talent-source.md#http-api); one keep-alive client per thread."""

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
        self._clients = PerThread(
            lambda: TalentApiClient(
                self.base_url, self._token, should_stop=self._should_stop, **self._client_options
            )
        )

    def __repr__(self) -> str:
        return f"ApiPullSource({self.base_url!r})"

    def _client(self) -> TalentApiClient:
        return self._clients.get()

    def check_available(self) -> None:
        try:
            self._client().health()
        except TalentSourceUnavailable as e:
            raise Refused(str(e), IMPORT_SOURCE_UNAVAILABLE) from None

    def plan_pages(
        self, stage: Entity, scope: Scope, *, page_size: int, start: str | None = None
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

    def fetch_page(self, stage: Entity, cursor: str | None, scope: Scope, *, page_size: int) -> list[Item]:
        return (
            self._client()
            .list_page(stage.collection, cursor, page_size, scope.developer_id, scope.project_id)
            .items
        )

    def developer_ids(self, project_id: str | None = None) -> list[str]:
        return [developer_id for developer_id, _ in self.developers(project_id)]

    def developers(self, project_id: str | None = None) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for page in self.plan_pages(DEVELOPER, Scope(project_id=project_id), page_size=MAX_PAGE_LIMIT):
            found.extend(
                (item["id"], str(item.get("name") or ""))
                for item in page.items or ()
                if isinstance(item.get("id"), str)
            )
        return found

    def close(self) -> None:
        self._clients.close()


__all__ = ["ApiPullSource"]

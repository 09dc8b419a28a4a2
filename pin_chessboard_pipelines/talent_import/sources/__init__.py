"""Where the import reads Talent from (docs/talent-initial-import.md#modes-apipull-and-topicreplay):
the Source protocol, ApiPull over the HTTP API, TopicReplay over the compacted topics, make_source."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import TalentSourceError
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.talent_import.request import ImportMode
from pin_chessboard_pipelines.talent_import.sources.api_pull import ApiPullSource
from pin_chessboard_pipelines.talent_import.sources.base import ImportSource, Item, PlannedPage
from pin_chessboard_pipelines.talent_import.sources.topic_replay import TopicReplaySource


def api_client_options(settings: Settings) -> dict[str, Any]:
    """The import's Talent client: TALENT_API_TIMEOUT_SECONDS per request, a few quick attempts;
    the page-retry budget (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS) governs longer outages."""
    return {"timeout": settings.talent_api_timeout_seconds, "max_attempts": 3}


def make_source(
    mode: ImportMode,
    settings: Settings,
    *,
    should_stop: Callable[[], bool] | None = None,
    dry_run: bool = False,
    engine: Engine | None = None,
    client_options: dict[str, Any] | None = None,
) -> ImportSource:
    """The source of a mode: the Talent API, or the compacted Talent topics."""
    if mode == ImportMode.API_PULL:
        return ApiPullSource(
            settings.talent_api_url,
            settings.talent_api_token,
            should_stop=should_stop,
            client_options={**api_client_options(settings), **(client_options or {})},
        )
    # A DryRun writes nothing, on Kafka either: the consumer group's offsets stay where they are.
    return TopicReplaySource(
        settings.kafka_bootstrap_servers, should_stop=should_stop, reset_offsets=not dry_run, engine=engine
    )


__all__ = [
    "ApiPullSource",
    "ImportSource",
    "Item",
    "PlannedPage",
    "TalentSourceError",
    "TopicReplaySource",
    "api_client_options",
    "make_source",
]

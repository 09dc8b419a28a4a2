"""The one resource every domain's assets, jobs and sensors use: settings and the store engine.

Built from environment variables when Dagster builds the definitions, never at import time.
"""

from __future__ import annotations

import logging
from functools import cached_property

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.events.relay import relay_after_commit
from pin_chessboard_pipelines.observability.tracing import configure_tracing
from pin_chessboard_pipelines.runtime.services import database_url
from pin_chessboard_pipelines.settings import Settings, load_settings
from pin_chessboard_pipelines.store.engine import get_engine


class ChessboardResource(dg.ConfigurableResource):
    """Settings from the environment (settings.py) and an engine on CHESSBOARD_DATABASE_URL.

    `database_url` overrides the environment (tests point it at their own database).
    """

    database_url: str | None = None

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Once per process that runs a job or a sensor with this resource: traces (README "Traces")."""
        configure_tracing(self.settings)

    @cached_property
    def settings(self) -> Settings:
        return load_settings()

    @cached_property
    def url(self) -> str:
        return self.database_url or database_url(self.settings)

    @property
    def engine(self) -> Engine:
        return get_engine(self.url)

    def relay_outbox(self, log: logging.Logger | dg.DagsterLogManager) -> None:
        """The outbox fast path after a job's commits; the relay sensor sweeps whatever is left."""
        result = relay_after_commit(self.engine, self.settings.kafka_bootstrap_servers)
        if result is not None:
            log.info(f"outbox fast path: {result.published} messages published in {result.seconds:.2f}s")

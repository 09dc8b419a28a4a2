"""The talent_developers partitions: one per Talent developer, listed from the API."""

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.config import PARTITIONS
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource, api_client_options


def list_talent_developers(settings: Settings, project_id: str | None = None) -> list[str]:
    """Talent developer ids from the API (all, or the developer of one project)."""
    source = ApiPullSource(
        settings.talent_api_url, settings.talent_api_token, client_options=api_client_options(settings)
    )
    try:
        return source.developer_ids(project_id)
    finally:
        source.close()


def new_developer_partitions(instance: dg.DagsterInstance, developer_ids: list[str]) -> list[str]:
    known = set(instance.get_dynamic_partitions(PARTITIONS))
    return [d for d in dict.fromkeys(developer_ids) if d not in known]


def add_developer_partitions(instance: dg.DagsterInstance, developer_ids: list[str]) -> list[str]:
    """Adds the partitions that are missing; returns them."""
    new = new_developer_partitions(instance, developer_ids)
    if new:
        instance.add_dynamic_partitions(PARTITIONS, new)
    return new

"""The browser page of the UI test modules (a module may override it with its own viewport), and the
Dagster stack the e2e modules share."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import chromium_page
from tests.support.dagster_stack import DagsterStack, stack_with_simulator


@pytest.fixture(scope="package")
def dagster_stack(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[DagsterStack]:
    """One webserver + daemon for the e2e modules that share it, with a tiny Talent simulator
    (DatasetSpec()); stopped after the last e2e test, so its daemon's ticks do not run beside the
    rest of the suite."""
    from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, DatasetSpec()) as (stack, _):
        yield stack


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with chromium_page(1400, 900) as page:
        yield page

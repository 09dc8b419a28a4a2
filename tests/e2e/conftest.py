"""The browser page of the UI test modules (a module may override it with its own viewport)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import chromium_page


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    with chromium_page(1400, 900) as page:
        yield page

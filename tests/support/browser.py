"""Chromium for the UI tests: Debian's /usr/bin/chromium driven by Playwright (never a browser
download), with the flags a closed network needs, and Dagster's newsletter prompt dismissed."""

from __future__ import annotations

from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def dismiss_newsletter(page: Any) -> None:
    """Dagster's prompt of a new instance shows up whenever it likes: skipped before any action."""
    page.add_locator_handler(
        page.get_by_text("Join the Dagster community"),
        lambda: page.get_by_role("button", name="Skip").click(force=True),
    )

"""Chromium for the UI tests: Debian's /usr/bin/chromium driven by Playwright (never a browser
download), with the flags a closed network needs, and Dagster's newsletter prompt dismissed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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
    """Dagster's prompt of a new instance (its CommunityNux) is marked dismissed in the browser
    before any page loads, as its Skip button does; should it show up all the same, it is skipped
    before any action."""
    page.add_init_script("window.localStorage.setItem('communityNux', JSON.stringify('1'))")
    page.add_locator_handler(
        page.get_by_text("Join the Dagster community"),
        lambda: page.get_by_role("button", name="Skip").click(force=True),
    )


@contextmanager
def chromium_page(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A page of Debian's chromium with the newsletter prompt dismissed, and every locator polling
    until its element is there: a generous deadline for a loaded machine."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(120_000)
            dismiss_newsletter(page)
            yield page
        finally:
            browser.close()


def screenshot_when_settled(page: Any, path: Path, timeout: float = 60.0) -> None:
    """Saves the page once two screenshots in a row are the same (the layout has settled), or the
    last one at `timeout`: a picture for docs/, not an assertion."""
    deadline = time.monotonic() + timeout
    previous = page.screenshot()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        shot = page.screenshot()
        if shot == previous:
            break
        previous = shot
    path.write_bytes(previous)


def type_launchpad_config(page: Any, url: str, config: str) -> None:
    """Opens a job's launchpad at `url` and replaces its config editor's text with `config`, as a
    person types it."""
    page.goto(url)
    editor = page.locator(".CodeMirror").first
    editor.wait_for()
    first = config.splitlines()[0].strip()
    for _ in range(3):
        # keys are no locator action: a newsletter prompt that shows up while they are typed takes
        # them, and only the next locator action (the click, the read below) dismisses it
        editor.click()
        page.keyboard.press("Control+A")
        page.keyboard.press("Delete")
        page.keyboard.insert_text(config)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if first in editor.inner_text():
                return
            time.sleep(0.2)
    raise AssertionError(f"the launchpad's editor did not take the config (first line {first!r})")

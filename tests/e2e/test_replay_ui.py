"""The quarantine replay by clicks, on the standard deployment (webserver + daemon): an import
quarantines items, Talent is fixed, the operator opens the `talent_replay_failed` launchpad (which
shows its `run_id` field), gives it the import's Dagster run id (the id the UI shows) and launches;
the items leave the quarantine and `no_quarantined_items` of `property_objects` turns green on the
asset's Checks tab. Then today's inventory, materialized by `pin-chessboard inventory` as the demo
does, is drawn on the asset's page. Playwright drives Debian's chromium; the screenshots are
docs/screenshots/ui-replay-*.png and ui-inventory-plots.png."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.browser import chromium_page, screenshot_when_settled, type_launchpad_config
from tests.support.dagster_stack import LOCATION, DagsterStack, stack_with_simulator
from tests.support.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("test_replay_ui")]

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
BROKEN = DatasetSpec(developers=1, projects_per_developer=1, objects_per_project=10, poison_every=5)
FIXED = dataclasses.replace(BROKEN, poison_every=0)
ENV = {"CHESSBOARD_RECALC_DEBOUNCE_SECONDS": "1", "CHESSBOARD_RECALC_CAP_SECONDS": "5"}


@dataclasses.dataclass
class Stack:
    stack: DagsterStack
    simulator: Any


@pytest.fixture(scope="module")
def deployment(pg_server_url: str, pg_template_url: str, kafka_bootstrap: str) -> Iterator[Stack]:
    with stack_with_simulator(pg_server_url, pg_template_url, kafka_bootstrap, BROKEN, ENV) as (
        stack,
        simulator,
    ):
        yield Stack(stack, simulator)


@pytest.fixture(scope="module")
def page(deployment: Stack) -> Iterator[Any]:
    with chromium_page(1400, 1000) as page:
        yield page


def _quarantined(stack: DagsterStack) -> int:
    with stack.engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT count(*) FROM chessboard.talent_import_failed_items")
        ).scalar_one()


def _quarantine_check(stack: DagsterStack) -> dict[str, Any] | None:
    data = stack.graphql.query(
        """
        {
          assetNodeOrError(assetKey: {path: ["property_objects"]}) {
            ... on AssetNode {
              assetChecksOrError {
                ... on AssetChecks { checks { name executionForLatestMaterialization { runId status } } }
              }
            }
          }
        }"""
    )
    checks = data["assetNodeOrError"]["assetChecksOrError"]["checks"]
    [check] = [c for c in checks if c["name"] == "no_quarantined_items"]
    return check["executionForLatestMaterialization"]


def test_a_replay_by_the_dagster_run_id_turns_the_quarantine_check_green(deployment: Stack, page):
    stack = deployment.stack
    imported = stack.cli("import", "--page-size", "5", timeout=300)
    assert imported.returncode == 0, imported.stderr[-3000:]
    dagster_run_id = json.loads(imported.stdout.strip().splitlines()[-1])["correlationId"]
    quarantined = _quarantined(stack)
    assert quarantined > 0
    red = wait_until(lambda: _quarantine_check(stack), timeout=60, what="the import's quarantine check")
    assert red["status"] == "FAILED" and red["runId"] == dagster_run_id

    deployment.simulator.set_spec(FIXED)  # the data fixed in Talent
    launchpad = f"{stack.webserver_url}/locations/{LOCATION}/jobs/talent_replay_failed/playground"
    page.goto(launchpad)
    editor = page.locator(".CodeMirror").first
    editor.wait_for()
    # the launchpad opens with the field to fill and its default, not `{}`
    wait_until(lambda: "run_id" in editor.inner_text(), timeout=60, what="run_id in the launchpad")
    type_launchpad_config(
        page,
        launchpad,
        f"ops:\n  replay_failed_items:\n    config:\n      run_id: {dagster_run_id}\n",
    )
    page.get_by_text(dagster_run_id).first.wait_for()
    page.screenshot(path=str(SCREENSHOTS / "ui-replay-launchpad.png"))
    page.get_by_role("button", name="Launch Run").click()
    page.wait_for_url("**/runs/**", timeout=120_000)
    run_id = page.url.rstrip("/").split("/runs/")[1].split("?")[0]
    run = stack.graphql.wait_for_run(run_id, timeout=240)
    assert run["status"] == "SUCCESS", (stack.graphql.run_messages(run_id), stack.log_tail())
    [done] = [m for m in stack.graphql.run_messages(run_id) if m.startswith("replay-failed-completed ")]
    assert f"RemovedFromQuarantine={quarantined}" in done
    assert _quarantined(stack) == 0

    green = wait_until(
        lambda: (c := _quarantine_check(stack)) and c["status"] == "SUCCEEDED" and c,
        timeout=60,
        what="no_quarantined_items evaluated green by the replay",
    )
    assert green["runId"] == run_id
    page.goto(f"{stack.webserver_url}/assets/property_objects?view=checks")
    page.get_by_text("no_quarantined_items").first.click()
    page.get_by_text(f"after the quarantine replay {run_id}: no item of this stage quarantined").wait_for()
    page.get_by_text("Passed").first.wait_for()
    screenshot_when_settled(page, SCREENSHOTS / "ui-replay-check-passed.png")


def test_todays_inventory_is_drawn_on_the_assets_page(deployment: Stack, page):
    stack = deployment.stack
    done = stack.cli("inventory", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["status"] == "Completed" and summary["projects"] >= 1
    # the Overview tab's Metadata section: Table, or Plots of the numeric entries (README.md)
    page.goto(f"{stack.webserver_url}/assets/project_inventory_daily?view=overview")
    page.get_by_placeholder("Filter metadata keys").wait_for()
    assert page.locator("canvas").count() == 0
    plots = page.get_by_role("button", name="Plots").first
    plots.click()
    # one chart per numeric entry, over the partitions (one point per materialized day)
    wait_until(lambda: page.locator("canvas").count() >= 3, timeout=60, what="the metadata's plots")
    page.get_by_text("median_free_price", exact=True).first.wait_for()
    plots.scroll_into_view_if_needed()
    page.mouse.wheel(0, 400)
    screenshot_when_settled(page, SCREENSHOTS / "ui-inventory-plots.png")

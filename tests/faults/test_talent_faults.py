"""A Talent API that accepts connections and never answers, and one that answers 503 / 429 for a
while and then recovers (talent-source.md, "Changes of v1.1": timeouts and page retries)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants
from tests.faults.services import BlackHoleTalent, FlakyTalent
from tests.support.polling import wait_until

SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=40, latency_ms=10)
TIMEOUTS = {"TALENT_API_TIMEOUT_SECONDS": "1", "CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS": "4"}


def test_an_api_that_never_answers_its_health_check_is_refused_in_bounded_time(cli):
    with BlackHoleTalent() as talent:
        # bounded: cli.run fails the test when the command has not ended within `timeout`
        done = cli.run("import", TALENT_API_URL=talent.url, timeout=120, **TIMEOUTS)
    assert done.returncode == 2, done.describe()
    assert done.last_error_line.startswith("CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE: "), done.describe()
    assert done.tracebacks == 0 and done.stdout == "", done.describe()


@pytest.mark.parametrize("scope", ["all", "developer"])
def test_listings_that_never_answer_fail_the_run_in_bounded_time_and_it_resumes(cli, talent_sim, scope):
    sim = talent_sim(SPEC)
    args = ["import", "--page-size", "10"]
    if scope == "developer":
        args += ["--developer-id", dataset.entity_id(SPEC, "developers", 0)]
    with BlackHoleTalent() as hole, FlakyTalent(sim.url, status=503, seconds=0) as front:
        front.listing_upstream = hole.url  # listings go to the black hole, /health to the simulator
        done = cli.run(*args, TALENT_API_URL=front.url, timeout=300, **TIMEOUTS)
    # a page that never answers: the run Fails (exit 1) within cli.run's timeout, resumable
    assert done.returncode == 1, done.describe()
    assert done.tracebacks == 0, done.describe()
    assert done.result["status"] == "Failed", done.describe()
    assert "timed out" in done.stderr or "timeout" in done.stderr, done.describe()
    # the cause, not "the import stopped before its last stage"
    assert "timed out" in done.last_error_line or "timeout" in done.last_error_line, done.describe()
    resumed = cli.run(*args, TALENT_API_URL=sim.url, timeout=300)
    assert resumed.returncode == 0, resumed.describe()
    assert resumed.result["runId"] == done.result["runId"]
    assert resumed.result["status"] == "Completed"


@pytest.mark.parametrize("status", [503, 429])
def test_an_api_answering_errors_for_a_while_then_recovering(cli, talent_sim, broker, status):
    """The outage lasts OUTAGE seconds (30 in production terms; shorter here, the retry budget is a
    setting) starting in the middle of the PropertyObjects stage; the import waits it out."""
    outage = 8.0
    sim = talent_sim(SPEC)
    url = cli.database_url
    with FlakyTalent(sim.url, status=status, seconds=outage) as front:
        running = cli.start(
            "import",
            "--page-size",
            "10",
            TALENT_API_URL=front.url,
            CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS="60",
        )
        wait_until(lambda: _done(url, "Layouts") >= 1, 120, "the import under way")
        front.start_failing()
        done = running.wait(timeout=300)
    assert done.returncode == 0, done.describe()
    assert done.result["status"] == "Completed"
    assert front.failed_answers > 0
    # every wait is logged with what it waits for
    assert "retry" in done.stderr.lower() and f"{status}" in done.stderr, done.describe()
    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    assert cli.run("outbox", "relay", "--until-empty", "--time-budget", "60").returncode == 0
    report = invariants.check_all(url, SPEC, bootstrap=broker.bootstrap, run_id=done.result["runId"])
    report.facts["injected answers"] = front.failed_answers
    assert report.ok, str(report)


def _done(url: str, stage: str) -> int:
    with get_engine(url).connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT count(*) FROM chessboard.talent_import_pages WHERE stage = :s AND status = 'Done'"
            ),
            {"s": stage},
        ).scalar_one()

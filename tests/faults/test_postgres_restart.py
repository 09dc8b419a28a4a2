"""PostgreSQL restarted (immediate shutdown, 0.5 s down) in the middle of an import and of a drain.

The command retries within the page-retry budget and completes, or fails with one clear line and a
truthful result, and completes on the re-run. Either way the invariants hold at the end.
"""

from __future__ import annotations

import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants
from tests.faults.cli import Done
from tests.support.polling import wait_until

SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=25, latency_ms=15)
IMPORT = ("import", "--page-size", "10", "--workers", "2")
RETRY_ENV = {"CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS": "60"}


def _scalar(url: str, sql: str, **params) -> int:
    try:
        with get_engine(url).connect() as conn:
            return conn.execute(sa.text(sql), params).scalar_one()
    except sa.exc.OperationalError:
        get_engine(url).dispose()
        return -1


def assert_failed_truthfully(done: Done) -> None:
    """A failure: exit 1, one clear last line on stderr, no stack trace, and a result (when the
    command prints one) that does not claim the run is still going."""
    assert done.returncode == 1, done.describe()
    assert done.tracebacks == 0, done.describe()
    assert done.last_error_line, done.describe()
    if done.stdout.strip():
        assert done.result.get("status") in ("Failed", "Cancelled"), done.describe()


def test_postgres_restarted_mid_import(cli, talent_sim, fault_pg, broker):
    sim = talent_sim(SPEC)
    url = cli.database_url
    running = cli.start(*IMPORT, TALENT_API_URL=sim.url, **RETRY_ENV)
    done_pages = "SELECT count(*) FROM chessboard.talent_import_pages WHERE stage = 'PropertyObjects' AND status = 'Done'"
    wait_until(lambda: _scalar(url, done_pages) >= 3, 120, "PropertyObjects pages Done")
    log_from = fault_pg.log_offset()
    fault_pg.restart(down_seconds=0.5, how="crash")
    first = running.wait()
    get_engine(url).dispose()
    if first.returncode != 0:
        assert_failed_truthfully(first)
        again = cli.run(*IMPORT, TALENT_API_URL=sim.url, **RETRY_ENV)
        assert again.returncode == 0, again.describe()
        result = again.result
    else:
        result = first.result
    assert result["status"] == "Completed"
    assert result["stages"]["PropertyObjects"]["planned"] == 150

    drained = cli.run("recalc", "drain", "--until-empty")
    assert drained.returncode == 0, drained.describe()
    relay = cli.run("outbox", "relay", "--until-empty", "--time-budget", "60")
    assert relay.returncode == 0, relay.describe()
    report = invariants.check_all(url, SPEC, bootstrap=broker.bootstrap, run_id=result["runId"])
    report.add("applied once", invariants.applied_once(url))
    report.facts["postgres log after the restart"] = invariants_log(fault_pg.log_since(log_from))
    assert report.ok, str(report)


def invariants_log(text: str) -> list[str]:
    from tests.faults.services import aborted_transactions

    return aborted_transactions(text)[:5]


def test_postgres_restarted_mid_drain(cli, talent_sim, fault_pg, broker):
    spec = DatasetSpec(developers=4, projects_per_developer=100, objects_per_project=4, layouts_per_project=1)
    sim = talent_sim(spec)
    url = cli.database_url
    imported = cli.run("import", "--page-size", "500", TALENT_API_URL=sim.url)
    assert imported.returncode == 0, imported.describe()
    queued = _scalar(url, "SELECT count(*) FROM chessboard.project_recalc_requests")
    assert queued == 400

    running = cli.start("recalc", "drain", "--until-empty", **RETRY_ENV)
    left = "SELECT count(*) FROM chessboard.project_recalc_requests"
    wait_until(lambda: 0 <= _scalar(url, left) <= queued - 20, 120, "the drain under way")
    fault_pg.restart(down_seconds=0.5, how="crash")
    first = running.wait()
    get_engine(url).dispose()
    remaining = _scalar(url, left)
    if first.returncode == 0:
        # success claims an empty queue: it must be true
        assert first.result.get("stopped") == "done" and remaining == 0, (first.describe(), remaining)
    else:
        assert_failed_truthfully(first)
        again = cli.run("recalc", "drain", "--until-empty")
        assert again.returncode == 0, again.describe()
    relay = cli.run("outbox", "relay", "--until-empty", "--time-budget", "60")
    assert relay.returncode == 0, relay.describe()
    report = invariants.check_all(url, spec, bootstrap=broker.bootstrap)
    assert report.ok, str(report)


def test_a_drain_after_an_outage_is_honest_about_rows_it_could_not_drain(cli, talent_sim, fault_pg):
    """`--until-empty` never says "empty" while a due row is left."""
    spec = DatasetSpec(developers=1, projects_per_developer=3, objects_per_project=3)
    sim = talent_sim(spec)
    url = cli.database_url
    assert cli.run("import", TALENT_API_URL=sim.url).returncode == 0
    fault_pg.stop("immediate")
    try:
        down = cli.run("recalc", "drain", "--until-empty", CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS="2")
    finally:
        fault_pg.start()
    get_engine(url).dispose()
    assert down.returncode != 0, down.describe()
    assert down.tracebacks == 0 and down.last_error_line, down.describe()
    if down.stdout.strip():
        assert down.result.get("stopped") != "done", down.describe()
    assert _scalar(url, "SELECT count(*) FROM chessboard.project_recalc_requests") == 3
    again = cli.run("recalc", "drain", "--until-empty")
    assert again.returncode == 0 and again.result.get("stopped") == "done", again.describe()
    assert invariants.audit_clean(url) == []


def test_a_wrong_database_is_one_line_for_drain_and_relay(cli):
    wrong = cli.database_url.rsplit("/", 1)[0] + "/no_such_database"
    for args in (("recalc", "drain"), ("outbox", "relay"), ("recalc", "audit")):
        done = cli.run(*args, CHESSBOARD_DATABASE_URL=wrong, CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS="1")
        assert done.returncode in (1, 2), done.describe()
        assert done.tracebacks == 0, done.describe()
        assert len(done.stderr.strip().splitlines()) <= 3, done.describe()
        assert "no_such_database" in done.last_error_line, done.describe()
        assert "DagsterExecutionStepExecutionError" not in done.stderr, done.describe()

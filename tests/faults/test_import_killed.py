"""SIGKILL of `pin-chessboard import` in the middle of a stage, then the same command again: the
run resumes, nothing is lost and nothing is applied twice."""

from __future__ import annotations

import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants
from tests.support.polling import wait_until

SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=25, latency_ms=15)
IMPORT = ("import", "--page-size", "10", "--workers", "2")


def _done_pages(url: str, stage: str) -> int:
    with get_engine(url).connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT count(*) FROM chessboard.talent_import_pages WHERE stage = :s AND status = 'Done'"
            ),
            {"s": stage},
        ).scalar_one()


def test_sigkill_mid_stage_then_the_same_command_resumes(cli, talent_sim, broker):
    sim = talent_sim(SPEC)
    running = cli.start(*IMPORT, TALENT_API_URL=sim.url)
    wait_until(
        lambda: _done_pages(cli.database_url, "PropertyObjects") >= 3, 120, "PropertyObjects pages Done"
    )
    running.kill()
    killed = running.wait()
    assert killed.returncode == -9
    with get_engine(cli.database_url).connect() as conn:
        before = conn.execute(sa.text("SELECT id::text, status FROM chessboard.talent_import_runs")).all()
        done_before = _done_pages(cli.database_url, "PropertyObjects")
    assert [status for _, status in before] == ["Running"]  # what a SIGKILL leaves

    resumed = cli.run(*IMPORT, TALENT_API_URL=sim.url)
    assert resumed.returncode == 0, resumed.describe()
    result = resumed.result
    assert (result["runId"], result["status"]) == (before[0][0], "Completed")
    po = result["stages"]["PropertyObjects"]
    assert po["planned"] == 150 and po["applied"] == 150 and po["failed"] == 0, po
    # the pages Done before the kill were neither read nor applied again
    assert _done_pages(cli.database_url, "PropertyObjects") == 15 > done_before

    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    relay = cli.run("outbox", "relay", "--until-empty", "--time-budget", "60")
    assert relay.returncode == 0, relay.describe()
    report = invariants.check_all(cli.database_url, SPEC, bootstrap=broker.bootstrap, run_id=before[0][0])
    report.add("applied once", invariants.applied_once(cli.database_url))
    assert report.ok, str(report)

"""Two of a kind at once: two imports, two relays, two drains; and an import beside two drains on
the same projects for a minute with no deadlock and no aborted transaction in PostgreSQL's log."""

from __future__ import annotations

import time

import sqlalchemy as sa

from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.faults import invariants
from tests.faults.services import aborted_transactions
from tests.support.polling import wait_until

SPEC = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=40, latency_ms=10)


def test_two_imports_started_together(cli, talent_sim, broker):
    sim = talent_sim(SPEC)
    args = ("import", "--page-size", "10")
    first = cli.start(*args, TALENT_API_URL=sim.url)
    second = cli.start(*args, TALENT_API_URL=sim.url)
    a, b = first.wait(timeout=300), second.wait(timeout=300)
    outcomes = sorted([a, b], key=lambda d: d.returncode)
    # the CLI waits for the lock (CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS, 300 s): both complete,
    # one after the other; the second is a no-op by the version guard
    assert [d.returncode for d in outcomes] == [0, 0], (a.describe(), b.describe())
    results = [d.result for d in outcomes]
    assert all(r["status"] == "Completed" for r in results)
    applied = sorted(r["stages"]["PropertyObjects"]["applied"] for r in results)
    assert applied == [0, 240], results
    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    assert cli.run("outbox", "relay", "--until-empty", "--time-budget", "60").returncode == 0
    report = invariants.check_all(cli.database_url, SPEC, bootstrap=broker.bootstrap)
    report.add("applied once", invariants.applied_once(cli.database_url))
    assert report.ok, str(report)


def test_a_second_import_gives_up_on_the_lock_with_one_line(cli, talent_sim):
    sim = talent_sim(DatasetSpec(**{**SPEC.__dict__, "latency_ms": 60}))
    first = cli.start("import", "--page-size", "5", TALENT_API_URL=sim.url)
    url = cli.database_url
    wait_until(lambda: _count(url, "SELECT count(*) FROM chessboard.talent_import_runs") == 1, 120, "a run")
    second = cli.run("import", TALENT_API_URL=sim.url, CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS="1")
    assert second.returncode == 2, second.describe()
    assert second.last_error_line.startswith("CHESSBOARD_IMPORT_LOCK_HELD: "), second.describe()
    assert second.tracebacks == 0
    assert first.wait(timeout=300).returncode == 0


def test_two_relays(cli, talent_sim, broker):
    spec = DatasetSpec(developers=2, projects_per_developer=3, objects_per_project=100)
    sim = talent_sim(spec)
    broker.kill()
    assert cli.run("import", "--page-size", "500", TALENT_API_URL=sim.url, timeout=300).returncode == 0
    assert cli.run("recalc", "drain", "--until-empty").returncode == 0
    broker.start()
    first = cli.start("outbox", "relay", "--until-empty", "--time-budget", "120")
    second = cli.start("outbox", "relay", "--until-empty", "--time-budget", "120")
    a, b = first.wait(timeout=240), second.wait(timeout=240)
    assert (a.returncode, b.returncode) == (0, 0), (a.describe(), b.describe())
    report = invariants.check_all(cli.database_url, spec, bootstrap=broker.bootstrap)
    assert report.ok, str(report)


def test_two_drains(cli, talent_sim, broker, fault_pg):
    spec = DatasetSpec(developers=3, projects_per_developer=100, objects_per_project=4, layouts_per_project=1)
    sim = talent_sim(spec)
    url = cli.database_url
    assert cli.run("import", "--page-size", "500", TALENT_API_URL=sim.url, timeout=300).returncode == 0
    log_from = fault_pg.log_offset()
    first = cli.start("recalc", "drain", "--until-empty")
    second = cli.start("recalc", "drain", "--until-empty")
    a, b = first.wait(timeout=240), second.wait(timeout=240)
    assert (a.returncode, b.returncode) == (0, 0), (a.describe(), b.describe())
    recalculated = a.result["recalculated"] + b.result["recalculated"]
    assert recalculated == 300, (a.result, b.result)  # each project exactly once
    assert aborted_transactions(fault_pg.log_since(log_from), _database(url)) == []
    assert cli.run("outbox", "relay", "--until-empty", "--time-budget", "60").returncode == 0
    report = invariants.check_all(url, spec, bootstrap=broker.bootstrap)
    assert report.ok, str(report)


def test_an_import_and_two_drains_on_the_same_projects_for_a_minute(cli, talent_sim, broker, fault_pg):
    """The import pages mutate projects and layouts and request recalcs while two drains recalculate
    the same projects: one lock order everywhere, so no deadlock and no aborted transaction."""
    base = DatasetSpec(developers=1, projects_per_developer=6, objects_per_project=60, layouts_per_project=4)
    sim = talent_sim(base)
    url = cli.database_url
    env = {"TALENT_API_URL": sim.url, "CHESSBOARD_RECALC_DEBOUNCE_SECONDS": "0"}
    assert cli.run("import", "--page-size", "20", **env).returncode == 0
    log_from = fault_pg.log_offset()
    deadline = time.monotonic() + 60
    generation = 1
    drains = [cli.start("recalc", "drain", "--until-empty", **env) for _ in range(2)]
    imports = 0
    while time.monotonic() < deadline:
        generation += 1
        # a newer generation that soft-deletes / restores entities and flips statuses: every page
        # changes published fields of every project, and so requests its recalc
        odd = generation % 2
        changed = {
            "version": generation,
            "deleted_every": 5 if odd else 0,
            "unknown_enum_every": 0 if odd else 3,
        }
        sim.set_spec(DatasetSpec(**{**base.__dict__, **changed}))
        done = cli.run("import", "--page-size", "20", "--workers", "2", **env)
        assert done.returncode == 0, done.describe()
        imports += 1
        for i, drain in enumerate(drains):
            if drain.proc.poll() is not None:
                finished = drain.wait()
                assert finished.returncode == 0, finished.describe()
                drains[i] = cli.start("recalc", "drain", "--until-empty", **env)
    for drain in drains:
        finished = drain.wait(timeout=120)
        assert finished.returncode == 0, finished.describe()
    final = cli.run("recalc", "drain", "--until-empty", **env)
    assert final.returncode == 0, final.describe()
    aborted = aborted_transactions(fault_pg.log_since(log_from), _database(url))
    assert aborted == [], "\n".join(aborted[:20])
    assert invariants.audit_clean(url) == []
    assert imports >= 2


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _count(url: str, sql: str) -> int:
    with get_engine(url).connect() as conn:
        return conn.execute(sa.text(sql)).scalar_one()

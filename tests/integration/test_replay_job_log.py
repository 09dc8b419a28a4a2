"""The `talent_replay_failed` job's result in its run log: one `replay-failed-completed` line of
Key=value fields, as every other job's lines."""

from __future__ import annotations

import dagster as dg
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import.replay import talent_replay_failed
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource

BROKEN = DatasetSpec(developers=1, projects_per_developer=1, objects_per_project=10, poison_every=5)
FIXED = DatasetSpec(**{**BROKEN.__dict__, "poison_every": 0})


def test_the_replay_result_is_one_key_value_line(db_url, engine, talent_sim, monkeypatch):
    sim = talent_sim(BROKEN)
    ImportSession(
        db_url,
        build_request(page_size=5),
        ApiPullSource(sim.url),
        options=ImportOptions(lock_timeout_seconds=1, retry_seconds=0.05),
    ).run_here()
    with engine.connect() as conn:
        quarantined = conn.execute(
            sa.text("SELECT count(*) FROM chessboard.talent_import_failed_items")
        ).scalar()
    assert quarantined
    sim.set_spec(FIXED)
    monkeypatch.setenv("TALENT_API_URL", sim.url)
    with dg.DagsterInstance.ephemeral() as instance:
        result = talent_replay_failed.execute_in_process(
            instance=instance, resources={"chessboard": ChessboardResource(database_url=db_url)}
        )
        assert result.success
        lines = [e.user_message for e in instance.all_logs(result.run_id) if e.user_message]
    [line] = [m for m in lines if m.startswith("replay-failed-completed ")]
    assert "Status=Completed" in line and f"RemovedFromQuarantine={quarantined}" in line
    assert f"PropertyObjects=planned:{quarantined}/applied:{quarantined}/skipped:0/failed:0" in line
    assert "{" not in line and "Developers=" not in line  # no dict, no stage without items

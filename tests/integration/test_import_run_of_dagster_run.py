"""The run-status sensors end the import run of a Dagster run that failed or was cancelled; the
daemon's retry of that Dagster run resumes the same import run (dagster.yaml `run_retries`). Either
may come first; the import run ends up Running with the retry, never ended under it."""

from __future__ import annotations

import threading
import time

import sqlalchemy as sa

from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.request import RunStatus
from tests.support.import_runs import insert_import_run

DEAD, RETRY = "dead-dagster-run", "retry-dagster-run"


def _end(engine, results: list) -> None:
    """What talent_import_failure_sensor does for the dead Dagster run."""
    with engine.begin() as conn:
        results.append(
            runs.end_run_of_dagster_run(
                conn,
                DEAD,
                RunStatus.FAILED,
                "its Dagster run ended FAILURE",
                debounce_seconds=30,
                cap_seconds=300,
            )
        )


def _row(engine, run_id) -> tuple:
    with engine.connect() as conn:
        return tuple(
            conn.execute(
                sa.text("SELECT status, dagster_run_id FROM chessboard.talent_import_runs WHERE id = :id"),
                {"id": run_id},
            ).one()
        )


def test_a_retry_that_resumes_the_run_while_the_sensor_ends_it_keeps_it_running(engine):
    run_id = insert_import_run(engine, dagster_run_id=DEAD)
    ended: list = []
    with engine.begin() as resume:  # the retry's resume, not yet committed when the sensor looks
        resume.execute(
            sa.text("UPDATE chessboard.talent_import_runs SET dagster_run_id = :d WHERE id = :id"),
            {"d": RETRY, "id": run_id},
        )
        sensor = threading.Thread(target=_end, args=(engine, ended))
        sensor.start()
        time.sleep(0.5)  # the sensor reaches the row and waits for the resume's transaction
        assert sensor.is_alive()
    sensor.join(timeout=30)
    assert ended == [None]
    assert _row(engine, run_id) == ("Running", RETRY)


def test_a_sensor_that_ends_the_run_first_leaves_it_for_the_retry_to_resume(engine):
    run_id = insert_import_run(engine, dagster_run_id=DEAD)
    ended: list = []
    _end(engine, ended)
    assert ended[0] is not None and _row(engine, run_id) == ("Failed", DEAD)
    ended.clear()
    _end(engine, ended)  # a second tick: nothing left to end
    assert ended == [None]

"""The `recalc_queue` asset is a reading of the queue, and says when it was read: `read_at` (the
database's clock) first, each row's state as of then and its seconds to DueAt from then. A row
recorded "waiting" and drained since reads as what it was at read_at, and the sensor records the
queue again once it changed."""

from __future__ import annotations

from datetime import datetime

import dagster as dg
import sqlalchemy as sa

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.runbook.definitions import recalc_queue_sensor
from pin_chessboard_pipelines.recalc.drain import drain
from tests.support.polling import wait_until
from tests.support.recalc_data import StoreBuilder, queue, standard_project


def _db_now(engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT now()")).scalar_one()


def _recorded(result) -> dict:
    assert isinstance(result, dg.SensorResult), result
    [materialization] = result.asset_events
    return {key: value.value for key, value in materialization.metadata.items()}


def test_the_queue_status_says_when_it_was_read_and_its_states_are_as_of_then(db_url, engine):
    with engine.begin() as conn:
        b = StoreBuilder(conn)
        project = standard_project(b, name="Soon due")
        b.request(project, due_in_seconds=8)  # waiting for a while (the debounce), however slow the reading
        due_at = queue(conn)[project.id]["due_at"]
    resources = {"chessboard": ChessboardResource(database_url=db_url)}
    with dg.DagsterInstance.ephemeral() as instance:
        context = dg.build_sensor_context(instance=instance, resources=resources)
        first = recalc_queue_sensor(context)
        context.update_cursor(first.cursor)
        status = _recorded(first)
        assert list(status)[0] == "read_at"  # the first thing the asset's page shows
        read_at = datetime.fromisoformat(status["read_at"])
        [row] = [record.data for record in status["oldest_rows"].records]
        assert row["state"] == "waiting" and due_at > read_at
        assert row["due_in_s"] > 0 and abs(row["due_in_s"] - (due_at - read_at).total_seconds()) <= 1

        # the row comes due and is drained: the recorded reading still says "waiting", as of read_at
        wait_until(lambda: _db_now(engine) > due_at, timeout=30, what="the row's DueAt passed")
        assert drain(engine, batch_size=50, poison_attempts=5).recalculated == 1
        assert due_at > read_at  # "waiting, due at" is before its read_at: no contradiction

        again = _recorded(recalc_queue_sensor(context))
        later = datetime.fromisoformat(again["read_at"])  # to the second, as due_at is shown
        assert later >= due_at.replace(microsecond=0) and due_at > read_at
        assert again["queue_depth"] == 0 and again["oldest_rows"].records == []

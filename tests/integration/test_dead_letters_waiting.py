"""The dead letters waiting to be replayed (docs/events.md#dead-letters), on a real broker and
store: talent-sync dead-letters a developer a trigger refuses; it waits (listed with its key,
origin, error and age by the `list_dead_letters` job and `pin-chessboard talent-sync dead-letters`,
counted by the exporter's watch); a replay that fails again leaves it waiting (written again at
the end); once the cause is fixed and it is replayed, nothing waits."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa
from confluent_kafka import Producer

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.defs.dead_letters.listing import OP_NAME, list_dead_letters_job
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.events.dead_letter_listing import (
    WaitingDeadLettersWatch,
    list_waiting,
    waiting_counts,
)
from pin_chessboard_pipelines.events.dead_letters import replay_dead_letters
from pin_chessboard_pipelines.talent.simulator.publish import ensure_topics
from pin_chessboard_pipelines.talent_sync import TalentSync, sync_policy
from tests.support.polling import wait_until
from tests.support.replica import refuse_developer

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

DEVELOPERS = ENTITIES[0]


def _refuse(engine, poison: str) -> None:
    with engine.begin() as conn:
        refuse_developer(conn, poison)


def _listed(broker: str, db_url: str) -> dict:
    result = list_dead_letters_job.execute_in_process(
        run_config={"ops": {OP_NAME: {"config": {"bootstrap_servers": broker}}}},
        resources={"chessboard": ChessboardResource(database_url=db_url)},
    )
    assert result.success
    (materialization,) = [
        e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"
    ]  # the op's output carries the metadata
    return {k: v.value for k, v in materialization.event_specific_data.metadata.items()}


def test_waiting_dead_letters_are_listed_counted_and_gone_once_replayed(
    engine, db_url, broker_in_settings, cli_env, capsys
):
    broker = broker_in_settings
    ensure_topics(broker)
    assert waiting_counts(broker) == {"talent-sync": 0, "handbook-sync": 0}  # no dead-letter topic yet
    items = [{"id": str(uuid.uuid4()), "version": 1, "name": f"ГК Тест {i}"} for i in range(3)]
    poison = items[1]["id"]
    _refuse(engine, poison)
    producer = Producer({"bootstrap.servers": broker})
    for item in items:
        producer.produce(
            DEVELOPERS.topic, key=item["id"].encode(), value=json.dumps(item).encode(), partition=0
        )
    assert producer.flush(10) == 0
    synced = TalentSync(engine, broker, poll_timeout=0.1, policy=sync_policy(attempts=2, initial=0.05)).run(
        until_idle=True, max_seconds=60
    )
    assert synced.dead_letters == 1

    listing = list_waiting(broker, "talent-sync")
    assert (listing.topic, listing.waiting, listing.replayed_up_to) == (
        "pin-chessboard-talent-sync.dlq",
        1,
        0,
    )
    (letter,) = listing.letters
    assert (letter.key, letter.origin_topic, letter.origin_partition, letter.origin_offset) == (
        poison,
        DEVELOPERS.topic,
        0,
        1,
    )
    assert f"developer {poison} refused" in letter.error and letter.attempts == 3
    assert letter.age_seconds is not None and 0 <= letter.age_seconds < 300
    assert waiting_counts(broker) == {"talent-sync": 1, "handbook-sync": 0}

    # the Dagster UI: the job's metadata, a count and a table
    metadata = _listed(broker, db_url)
    assert metadata["waiting"] == 1 and metadata["waiting_talent-sync"] == 1
    assert metadata["waiting_handbook-sync"] == 0
    table = metadata["dead_letters"]
    assert poison in table and f"{DEVELOPERS.topic}[0]@1" in table and "refused" in table

    # the CLI: the same job, the summary on the last line of stdout
    capsys.readouterr()
    assert main(["talent-sync", "dead-letters"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Completed" and summary["waiting"] == 1
    (consumer,) = summary["consumers"]
    assert consumer["consumer"] == "talent-sync" and consumer["deadLetters"][0]["key"] == poison
    assert consumer["deadLetters"][0]["originOffset"] == 1

    # the exporter's watch counts them
    watch = WaitingDeadLettersWatch(broker, every_seconds=0.5).start()
    try:
        wait_until(
            lambda: watch.read() == {"talent-sync": 1.0, "handbook-sync": 0.0}, 30, "the watch's counts"
        )
    finally:
        watch.stop()

    # a replay that fails again: still waiting, written again at the end with one more attempt
    still = replay_dead_letters(engine, broker, TalentSync(engine, broker))
    assert (still.read, still.failed_again) == (1, 1)
    again = list_waiting(broker, "talent-sync")
    assert (again.waiting, again.replayed_up_to) == (1, 1)
    assert again.letters[0].key == poison and again.letters[0].attempts == 4

    with engine.begin() as conn:
        conn.execute(sa.text("DROP TRIGGER refuse_one_developer ON chessboard.developers"))
    fixed = replay_dead_letters(engine, broker, TalentSync(engine, broker))
    assert fixed.applied == 1
    gone = list_waiting(broker, "talent-sync")
    assert (gone.waiting, gone.letters) == (0, [])
    assert waiting_counts(broker)["talent-sync"] == 0
    assert _listed(broker, db_url)["waiting"] == 0

"""Dead letters of talent-sync against real PostgreSQL and a Tansu broker (docs/events.md#dead-letters):
messages never block a partition, a delete stays deleted whatever comes late, a replay brings the
items that waited for its entity, and a batch read again does not quarantine twice."""

from __future__ import annotations

import json
import uuid

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.cli import main
from pin_chessboard_pipelines.entities import BUILDING, DEVELOPER, PROJECT, PROPERTY_OBJECT
from pin_chessboard_pipelines.errors import SYNC_PARENT_NOT_FOUND
from pin_chessboard_pipelines.events import consume_loop
from pin_chessboard_pipelines.events.dead_letters import replay_dead_letters
from pin_chessboard_pipelines.stopper import StopReason
from pin_chessboard_pipelines.talent.simulator.publish import ensure_topics
from pin_chessboard_pipelines.talent_sync import TalentSync, sync_policy
from tests.support.metrics import sample_value
from tests.support.talent_kafka import committed_offsets, count, dead_letters, produce

# every event written meets its schema (tests/support/contracts.py)
pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.usefixtures("outbox_contract")]

FAST = sync_policy(attempts=2, initial=0.05)


def _sync(engine, broker):
    return TalentSync(engine, broker, poll_timeout=0.1, policy=FAST).run(until_idle=True, max_seconds=60)


def _id() -> str:
    return str(uuid.uuid4())


def developer(talent_id: str, version: int = 1) -> dict:
    return {"id": talent_id, "version": version, "name": f"ГК {talent_id[:4]}"}


def project(talent_id: str, developer_id: str, version: int = 1) -> dict:
    return {
        "id": talent_id,
        "developerId": developer_id,
        "version": version,
        "name": f"ЖК {talent_id[:4]} v{version}",
        "type": "ResidentialComplex",
        "class": "Comfort",
        "constructionStatus": "UnderConstruction",
        "countryId": 643,
        "currencyId": 643,
    }


def building(talent_id: str, project_id: str) -> dict:
    return {"id": talent_id, "projectId": project_id, "version": 1, "name": "Корпус 1", "floorsCount": 9}


def property_object(talent_id: str, building_id: str, number: str = "1") -> dict:
    return {
        "id": talent_id,
        "buildingId": building_id,
        "version": 1,
        "number": number,
        "floor": 2,
        "status": "Free",
    }


def refuse(engine, table: str, condition: str) -> None:
    """A trigger of the test's own that refuses the writes of `table` matching `condition` (a
    failure of those messages alone, not a validation error)."""
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE FUNCTION chessboard.refuse_{table}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF {condition} THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$"
            )
        )
        conn.execute(
            sa.text(
                f"CREATE TRIGGER refuse_{table} BEFORE INSERT OR UPDATE ON chessboard.{table} "
                f"FOR EACH ROW EXECUTE FUNCTION chessboard.refuse_{table}()"
            )
        )


def allow(engine, table: str) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f"DROP TRIGGER refuse_{table} ON chessboard.{table}"))


def end_offsets(bootstrap: str) -> dict[tuple[str, int], int]:
    from pin_chessboard_pipelines.events.topics_admin import end_offsets as ends
    from pin_chessboard_pipelines.events.topics_admin import probe_consumer

    probe = probe_consumer(bootstrap)
    try:
        partitions = [
            (e.topic, p) for e in (DEVELOPER, PROJECT, BUILDING, PROPERTY_OBJECT) for p in range(e.partitions)
        ]
        return {key: end for key, (_, end) in ends(probe, partitions, 10).items()}
    finally:
        probe.close()


def alive(engine, table: str, talent_id: str) -> int:
    return count(
        engine,
        f"SELECT count(*) FROM chessboard.{table} WHERE external_talent_id = :id AND deleted_at IS NULL",
        id=talent_id,
    )


def test_two_failing_versions_of_one_project_beside_a_good_message_are_dead_lettered(
    cli_env, engine, broker_in_settings, capsys
):
    """Two updates of one broken project next to one good message: both go to the dead-letter
    topic, the good one applies, the run succeeds (exit 0) and the offsets move past all three
    (before v1.3 the run failed: 2 of 3 messages failing were taken for the consumer's failure)."""
    broker = broker_in_settings
    ensure_topics(broker)
    dev, broken, good = _id(), _id(), _id()
    produce(broker, DEVELOPER.topic, dev, developer(dev))
    produce(broker, PROJECT.topic, broken, project(broken, dev, 1))
    assert _sync(engine, broker).stopped is StopReason.DONE
    refuse(engine, "projects", f"NEW.external_talent_id = '{broken}'")
    produce(broker, PROJECT.topic, broken, project(broken, dev, 2))
    produce(broker, PROJECT.topic, broken, project(broken, dev, 3))
    produce(broker, PROJECT.topic, good, project(good, dev, 1))

    assert main(["talent-sync", "--until-idle", "--time-budget", "60"]) == 0

    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["status"] == "Completed"
    letters = dead_letters(broker)
    assert [(m.key().decode(), json.loads(m.value())["version"]) for m in letters] == [
        (broken, 2),
        (broken, 3),
    ]
    assert alive(engine, "projects", good) == 1
    assert (
        count(
            engine,
            "SELECT replica_version FROM chessboard.projects WHERE external_talent_id = :id",
            id=broken,
        )
        == 1
    )
    committed = committed_offsets(broker)
    assert all(committed[key] == end for key, end in end_offsets(broker).items() if end > 0)


def test_a_delete_stays_deleted_whatever_snapshot_comes_late_and_a_newer_one_re_creates(engine, broker):
    """A dead-lettered snapshot replayed after a later tombstone changes nothing and publishes
    nothing: of an existing project (v2 dead-lettered, then deleted) and of a new one (v1
    dead-lettered, then deleted). A snapshot written after the tombstone re-creates the project."""
    ensure_topics(broker)
    dev, kept, new = _id(), _id(), _id()
    produce(broker, DEVELOPER.topic, dev, developer(dev))
    produce(broker, PROJECT.topic, kept, project(kept, dev, 1))
    assert _sync(engine, broker).stopped is StopReason.DONE
    refuse(engine, "projects", f"NEW.replica_version = 2 OR NEW.external_talent_id = '{new}'")
    for talent_id, version in ((kept, 2), (new, 1)):  # one failing message per run
        produce(broker, PROJECT.topic, talent_id, project(talent_id, dev, version))
        produce(broker, PROJECT.topic, talent_id, None)
        result = _sync(engine, broker)
        assert result.stopped is StopReason.DONE and result.dead_letters == 1
    assert alive(engine, "projects", kept) == 0
    allow(engine, "projects")
    outbox = count(engine, "SELECT count(*) FROM chessboard.outbox_messages")

    replayed = replay_dead_letters(engine, broker, TalentSync(engine, broker))

    assert (replayed.read, replayed.applied, replayed.failed_again) == (2, 2, 0)
    assert alive(engine, "projects", kept) == 0
    assert (
        count(engine, "SELECT count(*) FROM chessboard.projects WHERE external_talent_id = :id", id=new) == 0
    )
    assert count(engine, "SELECT count(*) FROM chessboard.outbox_messages") == outbox  # nothing published

    produce(broker, PROJECT.topic, kept, project(kept, dev, 3))  # re-created in Talent after the delete
    produce(broker, PROJECT.topic, new, project(new, dev, 2))
    assert _sync(engine, broker).stopped is StopReason.DONE
    assert alive(engine, "projects", kept) == 1 and alive(engine, "projects", new) == 1
    assert count(engine, "SELECT count(*) FROM chessboard.outbox_messages") == outbox + 2


def test_a_replay_applies_the_items_that_waited_for_its_entity(cli_env, engine, broker_in_settings, capsys):
    """A new project dead-lettered with a building and the building's object behind it: they are
    quarantined as CHESSBOARD_SYNC_PARENT_NOT_FOUND; `replay-dlq` applies the project and them
    (transitively) and takes them out of the quarantine."""
    broker = broker_in_settings
    ensure_topics(broker)
    dev, new, house, flat = _id(), _id(), _id(), _id()
    refuse(engine, "projects", f"NEW.external_talent_id = '{new}'")
    produce(broker, DEVELOPER.topic, dev, developer(dev))
    produce(broker, PROJECT.topic, new, project(new, dev))
    produce(broker, BUILDING.topic, house, building(house, new))
    produce(broker, PROPERTY_OBJECT.topic, flat, property_object(flat, house))
    result = _sync(engine, broker)
    assert result.stopped is StopReason.DONE and result.dead_letters == 1
    waiting = "SELECT count(*) FROM chessboard.talent_import_failed_items WHERE error_code = :code"
    assert count(engine, waiting, code=SYNC_PARENT_NOT_FOUND) == 2
    allow(engine, "projects")

    assert main(["talent-sync", "replay-dlq"]) == 0

    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["read"], summary["applied"], summary["failedAgain"], summary["errors"]) == (1, 1, 0, [])
    assert alive(engine, "projects", new) == 1
    assert alive(engine, "buildings", house) == 1
    assert alive(engine, "property_objects", flat) == 1
    assert count(engine, waiting, code=SYNC_PARENT_NOT_FOUND) == 0


class Crash(BaseException):
    """The process dies between producing the dead letter and committing the offsets."""


def test_a_batch_read_again_after_a_crash_does_not_quarantine_twice(engine, broker, monkeypatch):
    """A batch with an invalid item (quarantined) and a message that keeps failing (dead-lettered):
    the process dies before the offsets are committed, the next run reads the batch again. The
    invalid item is quarantined once and counted once (chessboard_sync_failed_items_total)."""
    ensure_topics(broker)
    dev, broken, invalid = _id(), _id(), _id()
    produce(broker, DEVELOPER.topic, dev, developer(dev))
    assert _sync(engine, broker).stopped is StopReason.DONE
    refuse(engine, "projects", f"NEW.external_talent_id = '{broken}'")
    produce(broker, PROJECT.topic, broken, project(broken, dev))
    produce(broker, PROJECT.topic, invalid, {**project(invalid, dev), "countryId": 999})  # unknown country
    url = engine.url.render_as_string(hide_password=False)
    counted = sample_value(url, "chessboard_sync_failed_items_total", consumer="talent-sync")
    real_commit = consume_loop.commit_batch

    def crash(*_args, **_kwargs):
        raise Crash

    monkeypatch.setattr(consume_loop, "commit_batch", crash)
    with pytest.raises(Crash):
        _sync(engine, broker)
    monkeypatch.setattr(consume_loop, "commit_batch", real_commit)
    assert _sync(engine, broker).stopped is StopReason.DONE

    quarantined = "SELECT count(*) FROM chessboard.talent_import_failed_items WHERE external_id = :id"
    assert count(engine, quarantined, id=invalid) == 1
    assert sample_value(url, "chessboard_sync_failed_items_total", consumer="talent-sync") == counted + 1

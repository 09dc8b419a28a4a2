"""Parity of the import and the streaming consumer (docs/talent-initial-import.md): one Talent
dataset through (a) the ApiPull bootstrap, (b) the TopicReplay bootstrap and (c) the streaming consumer gives identical replica rows in every table and
identical pin.chessboard events (ignoring messageId / occurredAt / correlationId), the same
quarantine and the same recalc requests. A second generation of the dataset then changes a
project's owner (quarantined, CHESSBOARD_SYNC_IMMUTABLE_CHANGED, the row untouched) and deletes
a project (Archived in the row and its event) on all three paths alike.

The dataset has no duplicate-number poison: "the one applied first stays" makes that case depend
on the order a source lists objects in, which the three sources do not share.
"""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.entities import pin_id
from pin_chessboard_pipelines.errors import SYNC_IMMUTABLE_CHANGED
from pin_chessboard_pipelines.stopper import StopReason
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource, TopicReplaySource
from pin_chessboard_pipelines.talent_sync import TalentSync
from tests.support.talent_kafka import (
    event_set,
    extra_database,
    own_broker,
    replica_state,
    reset_group,
    side_effects,
)

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

SPEC = DatasetSpec(
    developers=2,
    projects_per_developer=3,
    buildings_per_project=2,
    layout_groups_per_project=2,
    layouts_per_project=3,
    objects_per_project=12,
    poison_every=40,  # one poison object (a price out of range)
    deleted_every=7,  # snapshots carrying deletedAt, in every collection
    unknown_enum_every=5,  # fallbacks
    unknown_reference_every=2,  # unresolved region / city ids
)
OPTIONS = ImportOptions(debounce_seconds=30, cap_seconds=300, retry_seconds=0.05)
# generation 2: every version + 1, project 3 names developer 0 (its owner is developer 1), project 4
# is deleted (and other entities' deletions move: deleted_every 7 -> 5)
SPEC2 = dataclasses.replace(SPEC, version=2, owner_changed_every=4, deleted_every=5)
OWNER_CHANGED, DELETED = 3, 4


def test_api_pull_topic_replay_and_streaming_sync_give_the_same_replica_and_events(
    db_url, engine, pg_server_url, talent_sim
):
    objects = dataset.count(SPEC, "property-objects")
    kinds = {dataset.poison_kind(SPEC, i) for i in range(objects)} - {None}
    assert kinds and "duplicate-number" not in kinds  # the precondition in the docstring

    simulator = talent_sim(SPEC)
    with (
        own_broker() as broker,
        extra_database(pg_server_url) as replay_url,
        extra_database(pg_server_url) as sync_url,
    ):
        publish_dataset(SPEC, broker)

        api_pull = ImportSession(
            db_url, build_request(mode="ApiPull", page_size=7), ApiPullSource(simulator.url), options=OPTIONS
        ).run_here()
        source = TopicReplaySource(broker, engine=get_engine(replay_url))
        topic_replay = ImportSession(
            replay_url,
            build_request(mode="TopicReplay", page_size=7),
            source,
            options=OPTIONS,
            apply=source.apply,
        ).run_here()
        reset_group(broker)  # the replay handed its offsets over; a fresh replica streams from 0
        streaming = TalentSync(
            get_engine(sync_url), broker, batch_size=25, poll_timeout=0.1, relay_events=False
        ).run(until_idle=True, max_seconds=60)

        assert api_pull.status == topic_replay.status == "Completed" and streaming.stopped is StopReason.DONE
        assert api_pull.totals.to_dict() == topic_replay.totals.to_dict()
        assert (
            streaming.applied == api_pull.totals.applied and streaming.failed == api_pull.totals.failed == 1
        )

        stores = {"ApiPull": engine, "TopicReplay": get_engine(replay_url), "streaming": get_engine(sync_url)}
        replicas = {name: replica_state(e) for name, e in stores.items()}
        events = {name: event_set(e) for name, e in stores.items()}
        effects = {name: side_effects(e) for name, e in stores.items()}
        project_rows = {name: _project_rows(e) for name, e in stores.items()}

        # generation 2 on every path: the stream goes on from its offsets first, then the replay
        # resets the shared group to 0 and re-reads both generations
        simulator.set_spec(SPEC2)
        publish_dataset(SPEC2, broker)
        streaming2 = TalentSync(
            get_engine(sync_url), broker, batch_size=25, poll_timeout=0.1, relay_events=False
        ).run(until_idle=True, max_seconds=60)
        api_pull2 = ImportSession(
            db_url, build_request(mode="ApiPull", page_size=7), ApiPullSource(simulator.url), options=OPTIONS
        ).run_here()
        topic_replay2 = ImportSession(
            replay_url,
            build_request(mode="TopicReplay", page_size=7),
            TopicReplaySource(broker, engine=get_engine(replay_url)),
            options=OPTIONS,
            apply=source.apply,
        ).run_here()
        assert (
            api_pull2.status == topic_replay2.status == "Completed" and streaming2.stopped is StopReason.DONE
        )
        replicas2 = {name: replica_state(e) for name, e in stores.items()}
        events2 = {name: event_set(e) for name, e in stores.items()}
        effects2 = {name: side_effects(e) for name, e in stores.items()}
        projects2 = {name: _last_project_events(e) for name, e in stores.items()}
        project_rows2 = {name: _project_rows(e) for name, e in stores.items()}

    reference = replicas["ApiPull"]
    assert sum(len(rows) for rows in reference.values()) == api_pull.totals.applied
    assert replicas["TopicReplay"] == reference
    assert replicas["streaming"] == reference
    assert sum(events["ApiPull"].values()) > api_pull.totals.applied  # + price / status events of objects
    assert events["TopicReplay"] == events["ApiPull"]
    assert events["streaming"] == events["ApiPull"]
    assert effects["TopicReplay"] == effects["ApiPull"]
    assert effects["streaming"] == effects["ApiPull"]

    # generation 2: the same replica, events and quarantine everywhere (a replay re-reads
    # generation 1's poison object and quarantines it once more: compared as a set)
    assert replicas2["TopicReplay"] == replicas2["ApiPull"] == replicas2["streaming"]
    assert events2["TopicReplay"] == events2["ApiPull"] == events2["streaming"]
    assert {name: set(e["quarantined"]) for name, e in effects2.items()} == {
        name: set(effects2["ApiPull"]["quarantined"]) for name in effects2
    }
    assert {name: e["recalc"] for name, e in effects2.items()} == {
        name: effects2["ApiPull"]["recalc"] for name in effects2
    }
    changed_id = dataset.entity_id(SPEC, "projects", OWNER_CHANGED)
    deleted_id = dataset.entity_id(SPEC, "projects", DELETED)
    for name in stores:
        quarantined = {(external, code) for stage, external, code in effects2[name]["quarantined"]}
        assert (changed_id, SYNC_IMMUTABLE_CHANGED) in quarantined, name
        before, after = project_rows[name], project_rows2[name]
        # the owner change: nothing of it applied, the row as generation 1 left it
        assert after[changed_id] == before[changed_id], name
        owner = pin_id("developer", dataset.entity_id(SPEC, "developers", 1))
        assert str(after[changed_id]["developer_id"]) == str(owner), name
        # the delete: archived in the row and in the project's last event
        assert after[deleted_id]["deleted_at"] is not None and after[deleted_id]["status"] == "Archived", name
        assert projects2[name][str(pin_id("project", deleted_id))]["status"] == "Archived", name


def _project_rows(engine) -> dict[str, dict]:
    """Every project row by Talent id, without the columns that say when."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM chessboard.projects")).mappings()
        return {
            str(r["external_talent_id"]): {
                k: v for k, v in r.items() if k not in ("created_at", "updated_at", "last_synced_at")
            }
            for r in rows
        }


def _last_project_events(engine) -> dict[str, dict]:
    """The last project-upserted payload of every project in the outbox."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT message_key, payload FROM chessboard.outbox_messages "
                "WHERE topic = 'pin.chessboard.project-upserted.v1' ORDER BY id"
            )
        )
        return {key: payload for key, payload in rows}

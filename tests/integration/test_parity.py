"""Parity of the import and the streaming consumer (docs/talent-initial-import.md): one Talent
dataset through (a) the ApiPull bootstrap, (b) the TopicReplay bootstrap and (c) the streaming consumer gives identical replica rows in every table and
identical pin.chessboard events (ignoring messageId / occurredAt / correlationId), the same
quarantine and the same recalc requests.

The dataset has no duplicate-number poison: "the one applied first stays" makes that case depend
on the order a source lists objects in, which the three sources do not share.
"""

from __future__ import annotations

import pytest

from pin_chessboard_pipelines.retry import StopReason
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, run_import
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

        api_pull = run_import(
            db_url, build_request(mode="ApiPull", page_size=7), ApiPullSource(simulator.url), options=OPTIONS
        )
        source = TopicReplaySource(broker, engine=get_engine(replay_url))
        topic_replay = run_import(
            replay_url,
            build_request(mode="TopicReplay", page_size=7),
            source,
            options=OPTIONS,
            apply=source.apply,
        )
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

    reference = replicas["ApiPull"]
    assert sum(len(rows) for rows in reference.values()) == api_pull.totals.applied
    assert replicas["TopicReplay"] == reference
    assert replicas["streaming"] == reference
    assert sum(events["ApiPull"].values()) > api_pull.totals.applied  # + price / status events of objects
    assert events["TopicReplay"] == events["ApiPull"]
    assert events["streaming"] == events["ApiPull"]
    assert effects["TopicReplay"] == effects["ApiPull"]
    assert effects["streaming"] == effects["ApiPull"]

"""TopicReplay refuses topics that are not compacted (CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE): the
cleanup.policy comes from the real broker's DescribeConfigs (Tansu reports the configs a topic was
created with and nothing else)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pin_chessboard_pipelines.entities import ENTITIES, PROJECT
from pin_chessboard_pipelines.errors import IMPORT_SOURCE_UNAVAILABLE, Refused
from pin_chessboard_pipelines.talent.simulator.publish import ensure_topics
from pin_chessboard_pipelines.talent_import.sources import TopicReplaySource
from pin_chessboard_pipelines.talent_import.sources.topic_replay import is_compacted
from tests.support.talent_kafka import own_broker

pytestmark = [pytest.mark.slow, pytest.mark.kafka]


def create(bootstrap: str, policies: dict[str, str | None]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(
            stage.topic, stage.partitions, 1, config={} if policy is None else {"cleanup.policy": policy}
        )
        for stage in ENTITIES
        for policy in [policies.get(stage.topic, "compact")]
    ]
    for future in admin.create_topics(topics, operation_timeout=10, request_timeout=10).values():
        future.result(10)


def check(bootstrap: str) -> None:
    source = TopicReplaySource(bootstrap, timeout=10)
    try:
        source.check_available()
    finally:
        source.close()


@pytest.mark.parametrize("policy", [None, "delete", "compact,delete"])
def test_a_topic_that_is_not_compacted_is_refused(policy):
    with own_broker() as bootstrap:
        create(bootstrap, {PROJECT.topic: policy})
        with pytest.raises(Refused) as refused:
            check(bootstrap)
    assert refused.value.code == IMPORT_SOURCE_UNAVAILABLE
    assert PROJECT.topic in str(refused.value) and "not compacted" in str(refused.value)
    assert f"cleanup.policy={policy or 'delete'}" in str(refused.value)


def test_compacted_topics_are_available():
    with own_broker() as bootstrap:
        ensure_topics(bootstrap)  # the simulator's: compacted
        check(bootstrap)


def test_only_compact_alone_is_compacted():
    assert is_compacted("compact") and is_compacted(" compact ")
    assert not is_compacted("delete") and not is_compacted("compact,delete")

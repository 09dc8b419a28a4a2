"""The topics the project creates on a cluster (operations.md "Production Kafka (v1.3)"), read back
from a real broker with describe_configs: the replication settings of CHESSBOARD_KAFKA_*, dead-letter
topics kept until replayed, and a topic that exists never changed."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from pin_chessboard_pipelines.events.dead_letters import dead_letter_topic
from pin_chessboard_pipelines.events.topics_admin import contract_topics, ensure_topics, topic_partitions
from pin_chessboard_pipelines.handbook_sync.consumer import HANDBOOK_CONSUMER_GROUP
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP

DEAD_LETTER_TOPICS = [dead_letter_topic(CONSUMER_GROUP), dead_letter_topic(HANDBOOK_CONSUMER_GROUP)]


def topic_configs(bootstrap: str, topic: str) -> dict[str, str]:
    """The configuration the broker reports for `topic` (Tansu: what the topic was created with)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {name: entry.value for name, entry in future.result(10).items()}


def test_dead_letter_topics_keep_their_messages_until_replayed(broker):
    assert DEAD_LETTER_TOPICS == ["pin-chessboard-talent-sync.dlq", "pin-chessboard-handbook-sync.dlq"]

    ensure_topics(broker, dict.fromkeys(DEAD_LETTER_TOPICS, 1))

    for topic in DEAD_LETTER_TOPICS:
        assert topic_configs(broker, topic)["retention.ms"] == "-1"


def test_contract_topics_take_the_cluster_settings_and_keep_the_contract_partitions(broker, monkeypatch):
    monkeypatch.setenv("CHESSBOARD_KAFKA_REPLICATION_FACTOR", "1")
    monkeypatch.setenv("CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS", "1")

    ensure_topics(broker)

    assert {t: n for t, n in topic_partitions(broker).items() if t in contract_topics()} == contract_topics()
    for topic in contract_topics():
        configs = topic_configs(broker, topic)
        assert configs.get("min.insync.replicas") == "1"
        assert "retention.ms" not in configs  # the broker's retention for the event topics


def test_the_broker_default_replication_factor_is_accepted(broker):
    """CHESSBOARD_KAFKA_REPLICATION_FACTOR unset: replication_factor=-1 (KIP-464), no
    min.insync.replicas of the project's."""
    created = ensure_topics(broker)

    assert sorted(created) == sorted(contract_topics())
    for topic in contract_topics():
        assert "min.insync.replicas" not in topic_configs(broker, topic)


@pytest.mark.parametrize("topic", [DEAD_LETTER_TOPICS[0], "pin.chessboard.project-upserted.v1"])
def test_a_topic_that_exists_is_never_changed(broker, monkeypatch, topic):
    admin = AdminClient({"bootstrap.servers": broker})
    before = {"retention.ms": "1000", "cleanup.policy": "delete"}
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1, config=before)])[
        topic
    ].result(10)
    monkeypatch.setenv("CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS", "1")

    created = ensure_topics(broker, {topic: 1})

    assert created == []
    assert topic_configs(broker, topic) == before
    assert topic_partitions(broker)[topic] == 2

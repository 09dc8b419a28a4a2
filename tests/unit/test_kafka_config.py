"""The Kafka client configuration (operations.md "Production Kafka (v1.3)"): KAFKA_* variables as
librdkafka properties, checked by librdkafka, secrets masked, the one base config of every client,
the refusal of a failed TLS handshake or login, and how the project's topics are created."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from pin_chessboard_pipelines.errors import KafkaRefused, error_line
from pin_chessboard_pipelines.events.kafka_client import client_config, on_client_error
from pin_chessboard_pipelines.events.topics_admin import new_topic
from pin_chessboard_pipelines.kafka_env import (
    is_secret_property,
    kafka_env_name,
    kafka_property_name,
    redact_secrets,
)
from pin_chessboard_pipelines.settings import (
    ConfigError,
    TopicReplication,
    kafka_properties,
    load_settings,
    topic_replication,
)

PACKAGE = Path(__file__).resolve().parents[2] / "pin_chessboard_pipelines"
PASSWORD = "Pw-unit-never-printed-42"


@pytest.mark.parametrize(
    ("env_name", "prop"),
    [
        ("KAFKA_SECURITY_PROTOCOL", "security.protocol"),
        ("KAFKA_SASL_MECHANISMS", "sasl.mechanisms"),
        ("KAFKA_SSL_CA_LOCATION", "ssl.ca.location"),
        ("KAFKA_SASL_OAUTHBEARER_CLIENT_SECRET", "sasl.oauthbearer.client.secret"),
        ("KAFKA_SSL_ENGINE__ID", "ssl.engine_id"),  # a literal `_` is written `__`
        ("KAFKA_A__B_C", "a_b.c"),
    ],
)
def test_a_variable_names_its_property_and_back(env_name, prop):
    assert kafka_property_name(env_name) == prop
    assert kafka_env_name(prop) == env_name


@pytest.mark.parametrize(
    "env_name",
    [
        "KAFKA_BOOTSTRAP_SERVERS",  # the project's own setting (settings.kafka_bootstrap_servers)
        "CHESSBOARD_KAFKA_REPLICATION_FACTOR",
        "MY_KAFKA_THING",
        # Kubernetes' service links of a Service named `kafka`
        "KAFKA_PORT",
        "KAFKA_SERVICE_HOST",
        "KAFKA_SERVICE_PORT",
        "KAFKA_SERVICE_PORT_TCP_CLIENT",
        "KAFKA_PORT_9092_TCP",
        "KAFKA_PORT_9092_TCP_ADDR",
        "KAFKA_PORT_9092_TCP_PROTO",
    ],
)
def test_variables_that_are_not_client_properties(env_name):
    assert kafka_property_name(env_name) is None


def test_kubernetes_service_links_do_not_stop_a_command():
    env = {
        "KAFKA_PORT": "tcp://10.0.0.7:9092",
        "KAFKA_SERVICE_HOST": "10.0.0.7",
        "KAFKA_PORT_9092_TCP_PORT": "9092",
    }
    assert kafka_properties(env) == {}


@pytest.mark.parametrize(
    ("prop", "secret"),
    [
        ("sasl.password", True),
        ("ssl.key.password", True),
        ("ssl.key.pem", True),
        ("ssl.keystore.password", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.oauthbearer.config", True),
        ("sasl.oauthbearer.assertion.private.key.passphrase", True),
        ("sasl.username", False),
        ("ssl.ca.location", False),
        ("ssl.key.location", False),
        ("security.protocol", False),
    ],
)
def test_secret_properties(prop, secret):
    assert is_secret_property(prop) is secret


def test_redaction_masks_only_the_values_of_secret_properties():
    properties = {"sasl.password": PASSWORD, "sasl.username": "svc-chessboard"}
    text = f"login of svc-chessboard with {PASSWORD} failed"
    assert redact_secrets(text, properties) == "login of svc-chessboard with *** failed"


def test_the_environment_becomes_properties_checked_by_librdkafka():
    env = {
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "KAFKA_SASL_MECHANISMS": "SCRAM-SHA-512",
        "KAFKA_SASL_USERNAME": "svc",
        "KAFKA_SASL_PASSWORD": "x",
        "KAFKA_BOOTSTRAP_SERVERS": "b:9093",
    }
    assert load_settings(env).kafka_properties == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "svc",
        "sasl.password": "x",
    }


def test_properties_librdkafka_refuses_together_are_refused():
    """SCRAM without a user: librdkafka's own rule, not a list of the project's."""
    env = {"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISMS": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match="sasl.username and sasl.password must be set"):
        load_settings(env)


@pytest.mark.parametrize(
    ("env", "starts", "says"),
    [
        (
            {"KAFKA_NO_SUCH_PROPERTY": "1"},
            "KAFKA_NO_SUCH_PROPERTY is invalid",
            "No such configuration property",
        ),
        ({"KAFKA_ACKS": "some"}, "KAFKA_ACKS is invalid", "Invalid value"),
        (
            {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_KEY_PEM": PASSWORD},
            "KAFKA_SSL_KEY_PEM is invalid",
            "ssl.key.pem",
        ),
    ],
)
def test_a_property_librdkafka_refuses_is_one_line_naming_its_variable(env, starts, says):
    with pytest.raises(ConfigError) as raised:
        load_settings({**env, "KAFKA_SASL_PASSWORD": PASSWORD})
    message = str(raised.value)
    assert message.startswith(starts)
    assert says in message
    assert "\n" not in message
    assert PASSWORD not in message


def test_a_secret_value_in_librdkafka_s_refusal_is_masked():
    with pytest.raises(ConfigError) as raised:
        load_settings({"KAFKA_SASL_PASSWORD": PASSWORD, "KAFKA_SECURITY_PROTOCOL": PASSWORD})
    assert PASSWORD not in str(raised.value)
    assert "***" in str(raised.value)


def test_settings_never_show_kafka_secrets():
    assert PASSWORD not in repr(load_settings({"KAFKA_SASL_PASSWORD": PASSWORD}))


def test_every_client_gets_the_environment_then_the_bootstrap_then_its_own_settings(monkeypatch):
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("KAFKA_GROUP_ID", "from-the-environment")
    monkeypatch.setenv("KAFKA_CLIENT_ID", "operator-chosen")

    config = client_config("broker:9093", {"group.id": "pin-chessboard-talent-sync"})

    assert config["security.protocol"] == "SSL"
    assert config["bootstrap.servers"] == "broker:9093"
    assert config["client.id"] == "operator-chosen"
    assert config["group.id"] == "pin-chessboard-talent-sync"  # the client's semantics win
    assert config["error_cb"] is on_client_error


@pytest.mark.parametrize(
    "code", [KafkaError._SSL, KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED]
)
def test_a_refused_handshake_or_login_stops_the_client_with_one_masked_line(code, monkeypatch):
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", PASSWORD)
    with pytest.raises(KafkaRefused) as raised:
        on_client_error(KafkaError(code, f"broker said no to {PASSWORD}\nsecond line"))
    line = raised.value.line()
    assert line.startswith("CHESSBOARD_KAFKA_REFUSED: Kafka refused the client: broker said no to ***")
    assert str(raised.value) == line
    assert "\n" not in line


@pytest.mark.parametrize("code", [KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT])
def test_a_broker_that_is_away_is_left_to_the_retries(code):
    on_client_error(KafkaError(code, "Connection refused"))


def test_error_lines_mask_kafka_secrets(monkeypatch):
    monkeypatch.setenv("KAFKA_SSL_KEY_PASSWORD", PASSWORD)
    assert PASSWORD not in error_line(RuntimeError(f"could not decrypt with {PASSWORD}"))


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, TopicReplication(-1, None)),
        ({"CHESSBOARD_KAFKA_REPLICATION_FACTOR": "3"}, TopicReplication(3, None)),
        (
            {"CHESSBOARD_KAFKA_REPLICATION_FACTOR": "3", "CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS": "2"},
            TopicReplication(3, 2),
        ),
        ({"CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS": "2"}, TopicReplication(-1, 2)),
    ],
)
def test_topic_replication_settings(env, expected):
    assert topic_replication(env) == expected
    assert load_settings(env).kafka_topic_replication == expected


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"CHESSBOARD_KAFKA_REPLICATION_FACTOR": "0"}, "CHESSBOARD_KAFKA_REPLICATION_FACTOR="),
        ({"CHESSBOARD_KAFKA_REPLICATION_FACTOR": "-2"}, "CHESSBOARD_KAFKA_REPLICATION_FACTOR="),
        ({"CHESSBOARD_KAFKA_REPLICATION_FACTOR": "three"}, "CHESSBOARD_KAFKA_REPLICATION_FACTOR="),
        ({"CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS": "0"}, "CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS="),
        ({"CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS": "-1"}, "CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS="),
        (
            {"CHESSBOARD_KAFKA_REPLICATION_FACTOR": "2", "CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS": "3"},
            "CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS=3 is invalid: expected at most",
        ),
    ],
)
def test_invalid_topic_replication_is_refused(env, name):
    with pytest.raises(ConfigError) as raised:
        load_settings(env)
    assert str(raised.value).startswith(name)


def test_a_dead_letter_topic_keeps_its_messages_and_every_topic_takes_the_replication():
    replication = TopicReplication(3, 2)
    dlq = new_topic("pin-chessboard-talent-sync.dlq", 1, replication)
    events = new_topic("pin.chessboard.project-upserted.v1", 6, replication)

    assert (dlq.num_partitions, dlq.replication_factor) == (1, 3)
    assert dlq.config == {"retention.ms": "-1", "min.insync.replicas": "2"}
    assert (events.num_partitions, events.replication_factor) == (6, 3)
    assert events.config == {"min.insync.replicas": "2"}
    assert new_topic("pin.chessboard.project-upserted.v1", 6, TopicReplication()).config == {}
    assert new_topic("pin.chessboard.project-upserted.v1", 6, TopicReplication()).replication_factor == -1


# The calls that build a Kafka client, and the functions that give them their configuration.
CLIENTS = {"Producer", "Consumer", "AdminClient"}
CONFIG_FUNCTIONS = {"client_config", "producer_config"}


def _client_calls_without_base_config(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) in CLIENTS):
            continue
        first = node.args[0] if node.args else None
        name = getattr(getattr(first, "func", None), "id", None)
        if name not in CONFIG_FUNCTIONS:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_every_kafka_client_of_the_project_is_built_on_the_base_config():
    offenders = [
        call
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "settings.py"  # the property check's own client, of no broker
        for call in _client_calls_without_base_config(path)
    ]
    assert offenders == []


def test_the_check_writes_nothing_even_with_librdkafka_s_debug(capfd):
    kafka_properties({"KAFKA_DEBUG": "all", "KAFKA_CLIENT_ID": "unit-debug-check"})
    assert capfd.readouterr().err == ""

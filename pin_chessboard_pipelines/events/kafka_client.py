"""The configuration of every Kafka client of the project (producers, consumers, admin clients, in
every process and pod), in one place: the KAFKA_* properties of the environment (settings.py), the
bootstrap servers, the client's own settings, and the error callback that stops on a refused
TLS handshake or SASL login instead of letting librdkafka retry it forever.

librdkafka's own log lines (it repeats a connection failure for as long as it lasts) go to this
module's logger at DEBUG, shown with `-v`; the errors reach `on_client_error`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from pin_chessboard_pipelines.errors import KafkaRefused
from pin_chessboard_pipelines.kafka_env import redact_secrets
from pin_chessboard_pipelines.settings import kafka_properties

log = logging.getLogger(__name__)

# The errors no retry fixes: the configuration (CA, protocol, mechanism, user, password) is wrong.
SECURITY_FAILURES = frozenset(
    {KafkaError._SSL, KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED}
)
FIRST_LOOK_SECONDS = 2.0  # a metadata request that fails this long: is the client refused?
REFUSAL_SECONDS = 3.0  # how long a refusal is looked for


class _LibrdkafkaLog:
    """librdkafka's log lines (the `logger` property) as DEBUG records of this module's logger."""

    def log(self, level: int, message: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(redact_secrets(message % args if args else message, kafka_properties()))


LIBRDKAFKA_LOG = _LibrdkafkaLog()


def client_config(bootstrap_servers: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A client's configuration: the environment's properties, `bootstrap_servers`, then the
    client's own `overrides` (what its semantics need: group.id, acks, ...), then the error
    callback."""
    return {
        "logger": LIBRDKAFKA_LOG,
        **kafka_properties(),
        "bootstrap.servers": bootstrap_servers,
        **(overrides or {}),
        "error_cb": on_client_error,
    }


def group_consumer(bootstrap_servers: str, group_id: str, client_id: str) -> Consumer:
    """A consumer of `group_id` that commits only what the caller commits (earliest offset where
    the group has none); the caller assigns its partitions."""
    return Consumer(
        client_config(
            bootstrap_servers,
            {
                "group.id": group_id,
                "client.id": client_id,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 6000,
                "fetch.wait.max.ms": 100,
            },
        )
    )


def on_client_error(error: KafkaError) -> None:
    """The error callback of every client, served by its poll/consume/flush: raises KafkaRefused
    (out of that call) for a failed TLS handshake or authentication, logs the others (librdkafka
    retries them: a broker that is away)."""
    if error.code() in SECURITY_FAILURES:
        raise KafkaRefused(refusal_line(error.str()))
    log.debug("kafka client error: %s", redact_secrets(error.str(), kafka_properties()))


def refusal_line(reason: str) -> str:
    """One line naming librdkafka's reason, secrets masked."""
    text = " ".join(reason.split())
    return redact_secrets(
        f"Kafka refused the client: {text} (check KAFKA_SECURITY_PROTOCOL, KAFKA_SSL_CA_LOCATION, "
        "KAFKA_SASL_MECHANISMS, KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD)",
        kafka_properties(),
    )


def list_topics(client: Any, bootstrap_servers: str, timeout: float, topic: str | None = None) -> Any:
    """`client.list_topics` within `timeout`, except that a broker refusing the client's TLS or
    login raises KafkaRefused (after about FIRST_LOOK_SECONDS) rather than the request's timeout:
    a metadata request serves no callback, so a first short one that fails is followed by
    `raise_if_refused`, then by the rest of the timeout."""
    deadline = time.monotonic() + timeout
    try:
        return client.list_topics(topic, timeout=min(timeout, FIRST_LOOK_SECONDS))
    except KafkaException:
        if timeout <= FIRST_LOOK_SECONDS:
            raise_if_refused(bootstrap_servers)
            raise
    raise_if_refused(bootstrap_servers, min(REFUSAL_SECONDS, max(0.0, deadline - time.monotonic())))
    return client.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))


def raise_if_refused(bootstrap_servers: str, seconds: float = REFUSAL_SECONDS) -> None:
    """After a client found no broker (a metadata request timed out, which serves no callback): a
    producer of the same configuration connects for up to `seconds` and raises KafkaRefused if its
    TLS handshake or login is refused; returns when it reaches the broker or hears nothing."""
    producer = Producer(client_config(bootstrap_servers))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        producer.poll(0.1)  # serves on_client_error
        try:
            producer.list_topics(timeout=0.2)
            return
        except KafkaException:
            continue

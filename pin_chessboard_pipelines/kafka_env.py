"""The KAFKA_<PROPERTY> variables (operations.md "Production Kafka (v1.3)"): which variable sets
which librdkafka property, which properties hold a secret, and their values masked in any text.

Below settings.py and errors.py, which both use it: settings parses the properties, errors keeps
their secrets out of every one-line error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

KAFKA_PREFIX = "KAFKA_"
# Set by Kubernetes in every pod of a namespace with a Service named `kafka` (service links:
# KAFKA_PORT, KAFKA_SERVICE_HOST, KAFKA_PORT_9092_TCP_ADDR, ...): addresses, not client properties.
_SERVICE_LINK = re.compile(
    r"KAFKA_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_[A-Z]+)?)?)"
)
# A property whose name holds one of these carries a secret: its value is never shown.
_SECRET_MARKERS = ("password", "secret", "passphrase", "key.pem", "private.key", "sasl.oauthbearer.config")
_REDACTED = "***"


def kafka_property_name(env_name: str) -> str | None:
    """The librdkafka property a KAFKA_<PROPERTY> variable sets: lower case, `_` -> `.`, `__` -> `_`
    (KAFKA_SASL_MECHANISMS -> sasl.mechanisms); None for any other variable, for
    KAFKA_BOOTSTRAP_SERVERS (kafka_bootstrap_servers) and for Kubernetes' service links."""
    if not env_name.startswith(KAFKA_PREFIX) or env_name == "KAFKA_BOOTSTRAP_SERVERS":
        return None
    if _SERVICE_LINK.fullmatch(env_name):
        return None
    rest = env_name[len(KAFKA_PREFIX) :]
    return "_".join(part.replace("_", ".") for part in rest.split("__")).lower() or None


def kafka_env_name(prop: str) -> str:
    """The variable of a property: kafka_env_name("sasl.mechanisms") == "KAFKA_SASL_MECHANISMS"."""
    return KAFKA_PREFIX + "__".join(part.replace(".", "_") for part in prop.split("_")).upper()


def is_secret_property(prop: str) -> bool:
    """sasl.password, ssl.key.password, ssl.key.pem, sasl.oauthbearer.client.secret, ..."""
    return any(marker in prop.lower() for marker in _SECRET_MARKERS)


def redact_secrets(text: str, properties: Mapping[str, str]) -> str:
    """`text` with the value of every secret property replaced by ***."""
    for prop, value in properties.items():
        if value and is_secret_property(prop):
            text = text.replace(value, _REDACTED)
    return text


def redact_kafka_secrets(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` with the value of every secret KAFKA_* variable of `env` (the process's) masked."""
    env = os.environ if env is None else env
    return redact_secrets(
        text, {prop: value for name, value in env.items() if (prop := kafka_property_name(name)) is not None}
    )

"""Every environment variable of the project, parsed and validated in one place.

README.md#configuration lists them.
An invalid value raises ConfigError naming the variable and what it expects; the CLI turns
that into one line on stderr and exit code 2.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, TypeVar
from urllib.parse import urlsplit

from pin_chessboard_pipelines.errors import ConfigError, mask_url_passwords
from pin_chessboard_pipelines.kafka_env import (
    kafka_env_name,
    kafka_property_name,
    redact_secrets,
)

T = TypeVar("T")

# Embedded defaults of `make demo` (see runtime/embedded.py).
DEFAULT_TALENT_API_URL = "http://127.0.0.1:18080"
DEFAULT_KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:19092"
PROJECT_ROOT = Path(__file__).resolve().parent.parent
# CHESSBOARD_DAGSTER_EXECUTOR: steps in the run's process, one OS process each, one Kubernetes Job each
DAGSTER_EXECUTORS = ("in_process", "multiprocess", "k8s")


class RecalcTiming(TypedDict):
    """When a recalc request falls due, as every writer of one takes it (`**settings.recalc_timing`)."""

    debounce_seconds: float
    cap_seconds: float


@dataclass(frozen=True)
class Settings:
    database_url: str | None  # None = the embedded PostgreSQL
    dagster_home: Path
    state_dir: Path
    talent_api_url: str
    talent_api_token: str | None
    kafka_bootstrap_servers: str
    talent_sync_enabled: bool
    import_page_size: int
    import_lease_seconds: int
    import_lock_timeout_seconds: float
    recalc_debounce_seconds: float
    recalc_cap_seconds: float
    recalc_batch_size: int
    recalc_poison_attempts: int
    outbox_retention_seconds: int
    recalc_drain_lifetime_seconds: float
    recalc_drain_poll_seconds: float
    recalc_drain_lead_seconds: float
    run_retention_days: int
    # traces: where spans go (None = nowhere; README "Traces"); the SDK reads the other OTEL_* itself
    otel_traces_endpoint: str | None = None
    otel_sdk_disabled: bool = False
    # a Talent request without a complete answer within this is a failed attempt
    talent_api_timeout_seconds: float = 30.0
    # transient failures of a page (source or database) are retried with backoff this long
    import_page_retry_seconds: float = 600.0
    # the executor of the import and recalc jobs (defs/executors.py), one of DAGSTER_EXECUTORS
    dagster_executor: str = "in_process"
    # drain workers (steps) of each sensor-started recalc run (operations.md "Scale-out")
    recalc_drains: int = 1
    # every other KAFKA_* variable as a librdkafka property (operations.md "Production Kafka")
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    # the topics the project creates: replication factor (-1 = the broker's), min.insync.replicas
    kafka_topic_replication: TopicReplication = field(default_factory=lambda: TopicReplication())
    # event contract versions published, and the modules defining those beyond 1 (events/contracts.py)
    contract_versions: tuple[int, ...] = (1,)
    contract_builders: tuple[str, ...] = ()

    @property
    def recalc_timing(self) -> RecalcTiming:
        return RecalcTiming(
            debounce_seconds=self.recalc_debounce_seconds, cap_seconds=self.recalc_cap_seconds
        )

    def __repr__(self) -> str:  # never print the token
        token = "***" if self.talent_api_token else None
        return (
            f"Settings(database_url={redact_url(self.database_url)!r}, talent_api_url={self.talent_api_url!r}, "
            f"talent_api_token={token!r}, kafka_bootstrap_servers={self.kafka_bootstrap_servers!r})"
        )


def _parse(env: Mapping[str, str], name: str, default: T, parse: Callable[[str], T], expects: str) -> T:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return parse(raw.strip())
    except (ValueError, TypeError):
        raise ConfigError(f"{name}={raw!r} is invalid: expected {expects}") from None


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not lo <= value <= hi:
            raise ValueError(raw)
        return value

    return parse


def _seconds(lo: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        value = float(raw)
        if not value >= lo or value != value or value == float("inf"):
            raise ValueError(raw)
        return value

    return parse


def _bool(raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(raw)


def _postgres_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("postgresql", "postgres", "postgresql+psycopg2"):
        raise ValueError(raw)
    return raw


def _http_url(raw: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(raw)
    return raw.rstrip("/")


def _bootstrap(raw: str) -> str:
    for server in raw.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(raw)
    return raw


def _otlp_protocol(raw: str) -> str:
    if raw != "http/protobuf":  # the one OTLP exporter installed (observability/tracing.py)
        raise ValueError(raw)
    return raw


def _otel_traces_endpoint(env: Mapping[str, str]) -> str | None:
    """OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces (the
    OTLP/HTTP rules of the OpenTelemetry specification)."""
    for name in ("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        _parse(env, name, "http/protobuf", _otlp_protocol, "http/protobuf")
    traces = _parse(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None, _http_url, "an http(s):// URL")
    if traces is not None:
        return traces
    base = _parse(env, "OTEL_EXPORTER_OTLP_ENDPOINT", None, _http_url, "an http(s):// URL")
    return None if base is None else base + "/v1/traces"


def _positive_seconds(raw: str) -> float:
    value = _seconds(0)(raw)
    if value <= 0:
        raise ValueError(raw)
    return value


# The variables read by one parser each: (Settings field, variable, default, parser, what it must be).
# fmt: off
_PARSED: tuple[tuple[str, str, Any, Callable[[str], Any], str], ...] = (
    ("database_url", "CHESSBOARD_DATABASE_URL", None, _postgres_url, "a postgresql:// URL"),
    ("talent_api_url", "TALENT_API_URL", DEFAULT_TALENT_API_URL, _http_url, "an http(s):// URL"),
    ("kafka_bootstrap_servers", "KAFKA_BOOTSTRAP_SERVERS", DEFAULT_KAFKA_BOOTSTRAP_SERVERS, _bootstrap, "host:port[,host:port...]"),
    ("talent_sync_enabled", "CHESSBOARD_TALENT_SYNC_ENABLED", True, _bool, "true or false"),
    ("import_page_size", "CHESSBOARD_IMPORT_PAGE_SIZE", 500, _int_in(1, 2000), "an integer 1..2000"),
    ("import_lease_seconds", "CHESSBOARD_IMPORT_LEASE_SECONDS", 600, _int_in(1, 86400), "an integer 1..86400 (seconds)"),
    ("import_lock_timeout_seconds", "CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS", 300.0, _seconds(0), "a number of seconds >= 0"),
    ("recalc_debounce_seconds", "CHESSBOARD_RECALC_DEBOUNCE_SECONDS", 30.0, _seconds(0), "a number of seconds >= 0"),
    ("recalc_cap_seconds", "CHESSBOARD_RECALC_CAP_SECONDS", 300.0, _seconds(0), "a number of seconds >= 0"),
    ("recalc_batch_size", "CHESSBOARD_RECALC_BATCH_SIZE", 50, _int_in(1, 10000), "an integer 1..10000"),
    ("recalc_poison_attempts", "CHESSBOARD_RECALC_POISON_ATTEMPTS", 5, _int_in(1, 1000), "an integer 1..1000"),
    ("outbox_retention_seconds", "CHESSBOARD_OUTBOX_RETENTION_SECONDS", 7 * 86400, _int_in(0, 10**9), "an integer >= 0 (seconds)"),
    ("recalc_drain_lifetime_seconds", "CHESSBOARD_RECALC_DRAIN_LIFETIME_SECONDS", 300.0, _seconds(1), "a number of seconds >= 1"),
    ("recalc_drain_poll_seconds", "CHESSBOARD_RECALC_DRAIN_POLL_SECONDS", 1.0, _seconds(0.05), "a number of seconds >= 0.05"),
    ("recalc_drain_lead_seconds", "CHESSBOARD_RECALC_DRAIN_LEAD_SECONDS", 30.0, _seconds(0), "a number of seconds >= 0"),
    ("run_retention_days", "CHESSBOARD_RUN_RETENTION_DAYS", 7, _int_in(1, 36500), "an integer 1..36500 (days)"),
    ("otel_sdk_disabled", "OTEL_SDK_DISABLED", False, _bool, "true or false"),
    ("talent_api_timeout_seconds", "TALENT_API_TIMEOUT_SECONDS", 30.0, _positive_seconds, "a number of seconds > 0"),
    ("import_page_retry_seconds", "CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS", 600.0, _seconds(0), "a number of seconds >= 0"),
    ("recalc_drains", "CHESSBOARD_RECALC_DRAINS", 1, _int_in(1, 16), "an integer 1..16"),
)
# fmt: on


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    state_dir = Path(env.get("PIN_CHESSBOARD_STATE_DIR") or PROJECT_ROOT / ".state").resolve()
    parsed = {field: _parse(env, name, default, parse, what) for field, name, default, parse, what in _PARSED}
    return Settings(
        **parsed,
        dagster_home=Path(env.get("DAGSTER_HOME") or state_dir / "dagster_home").resolve(),
        state_dir=state_dir,
        talent_api_token=env.get("TALENT_API_TOKEN") or None,
        otel_traces_endpoint=_otel_traces_endpoint(env),
        dagster_executor=load_dagster_executor(env),
        kafka_properties=kafka_properties(env),
        kafka_topic_replication=topic_replication(env),
        contract_versions=parse_contract_versions(env),
        contract_builders=parse_contract_builders(env),
    )


# Contract versions (chessboard-store.md "Contract versions (v1.3)"). Parsed here; whether a
# version has a payload builder is events/contracts.py's `published` (it imports the builders).
CONTRACT_VERSIONS_VARIABLE = "CHESSBOARD_CONTRACT_VERSIONS"
CONTRACT_BUILDERS_VARIABLE = "CHESSBOARD_CONTRACT_BUILDERS"


def _versions(raw: str) -> tuple[int, ...]:
    versions = tuple(int(part) for part in raw.split(","))
    if any(v < 1 for v in versions) or len(set(versions)) != len(versions):
        raise ValueError(raw)
    return versions


def _modules(raw: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in raw.split(","))
    if not all(part and all(p.isidentifier() for p in part.split(".")) for part in names):
        raise ValueError(raw)
    return names


def parse_contract_versions(env: Mapping[str, str]) -> tuple[int, ...]:
    return _parse(
        env,
        CONTRACT_VERSIONS_VARIABLE,
        (1,),
        _versions,
        "distinct versions >= 1 separated by commas, e.g. 1,2",
    )


def parse_contract_builders(env: Mapping[str, str]) -> tuple[str, ...]:
    return _parse(env, CONTRACT_BUILDERS_VARIABLE, (), _modules, "Python module names separated by commas")


def load_dagster_executor(env: Mapping[str, str] | None = None) -> str:
    """CHESSBOARD_DAGSTER_EXECUTOR alone: the definitions read it when they load, the rest of the
    settings when a job or sensor runs."""
    env = os.environ if env is None else env
    return _parse(
        env,
        "CHESSBOARD_DAGSTER_EXECUTOR",
        "in_process",
        _one_of(DAGSTER_EXECUTORS),
        " | ".join(DAGSTER_EXECUTORS),
    )


def _one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in choices:
            raise ValueError(raw)
        return raw

    return parse


def redact_url(url: str | None) -> str | None:
    """The URL with its password replaced, for logs."""
    return mask_url_passwords(url) if url else url


# -- Kafka client properties (operations.md "Production Kafka (v1.3)") ---------------------------


def kafka_properties(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The KAFKA_* variables of `env` as librdkafka properties, checked by librdkafka itself: a
    property it does not know (or a value it refuses) raises ConfigError naming the variable."""
    env = os.environ if env is None else env
    properties = {
        prop: value for name, value in env.items() if (prop := kafka_property_name(name)) is not None
    }
    _check_kafka_properties(tuple(sorted(properties.items())))
    return properties


class _UnreadLog:
    def log(self, *_: object) -> None:  # pragma: no cover - a client that is never polled
        pass


_UNREAD_LOG = _UnreadLog()


@functools.lru_cache(maxsize=32)
def _check_kafka_properties(items: tuple[tuple[str, str], ...]) -> None:
    """Builds a producer of these properties (and no broker: it connects nowhere) and destroys it."""
    if not items:
        return
    from confluent_kafka import KafkaException, Producer

    properties = dict(items)
    try:
        # its log lines (no bootstrap.servers; KAFKA_DEBUG's) go to a logger it never serves
        Producer({**properties, "logger": _UNREAD_LOG})
    except KafkaException as error:
        raise ConfigError(_kafka_refusal(error.args[0].str(), properties)) from None


def _kafka_refusal(reason: str, properties: Mapping[str, str]) -> str:
    """One line: the variable of the property librdkafka names in `reason`, and the reason."""
    culprit = next((p for p in sorted(properties, key=len, reverse=True) if f'"{p}"' in reason), None)
    culprit = culprit or next((p for p in sorted(properties, key=len, reverse=True) if p in reason), None)
    names = kafka_env_name(culprit) if culprit else "the KAFKA_* variables"
    return redact_secrets(f"{names} is invalid: librdkafka says {reason}", properties).replace("\n", " ")


@dataclass(frozen=True)
class TopicReplication:
    """How the topics the project creates are replicated (an existing topic is never changed)."""

    replication_factor: int = -1  # -1: the broker's default.replication.factor (KIP-464)
    min_insync_replicas: int | None = None  # None: the broker's


def topic_replication(env: Mapping[str, str] | None = None) -> TopicReplication:
    """CHESSBOARD_KAFKA_REPLICATION_FACTOR and CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS."""
    env = os.environ if env is None else env
    factor = _parse(
        env, "CHESSBOARD_KAFKA_REPLICATION_FACTOR", -1, _replication_factor, "-1 (the broker's) or 1..32767"
    )
    min_insync = _parse(
        env, "CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS", None, _int_in(1, 32767), "an integer 1..32767"
    )
    if min_insync is not None and factor != -1 and min_insync > factor:
        raise ConfigError(
            f"CHESSBOARD_KAFKA_MIN_INSYNC_REPLICAS={min_insync} is invalid: expected at most "
            f"CHESSBOARD_KAFKA_REPLICATION_FACTOR={factor}"
        )
    return TopicReplication(replication_factor=factor, min_insync_replicas=min_insync)


def _replication_factor(raw: str) -> int:
    value = int(raw)
    if value != -1 and not 1 <= value <= 32767:
        raise ValueError(raw)
    return value

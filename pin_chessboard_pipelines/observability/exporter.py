"""What `pin-chessboard metrics serve --port P` exposes, in Prometheus text format.

Counters, histograms and recorded gauges: the sums every process of every run wrote to
chessboard.metric_samples (samples.py). Gauges of live state: read from PostgreSQL at each scrape
(STORE_GAUGES), so no crash can leave one stuck. The caller (cli/metrics.py) passes the functions
that run the store's queries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pin_chessboard_pipelines.observability import metrics

log = logging.getLogger(__name__)

# Pages Done in this window make chessboard_import_throughput_items_per_sec.
THROUGHPUT_WINDOW_SECONDS = 60
# a process that finished a page this recently still counts as working on the import
PROCESS_RECENT_SECONDS = 15


@dataclass(frozen=True)
class StoreGauge:
    name: str
    documentation: str
    file: str  # store/sql/<file>.sql
    query: str  # named query returning one row with one column `value`


STORE_GAUGES: tuple[StoreGauge, ...] = (
    StoreGauge(
        "chessboard_import_running",
        "1 while a talent initial import runs: a Running run with a heartbeat of its run worker "
        "within the 90-second rule (whoever launched it, whatever the executor)",
        "metrics",
        "import_running",
    ),
    StoreGauge(
        "chessboard_import_processes",
        "Processes (host:pid) holding an import page, or that finished one in the last "
        f"{PROCESS_RECENT_SECONDS} s",
        "metrics",
        "import_processes",
    ),
    StoreGauge(
        "chessboard_import_throughput_items_per_sec",
        f"Items of import pages Done in the last {THROUGHPUT_WINDOW_SECONDS} s, per second",
        "metrics",
        "import_throughput",
    ),
    StoreGauge(
        "chessboard_import_runs_running",
        "talent_import_runs rows in status Running (a killed import stays Running until resumed)",
        "metrics",
        "import_runs_running",
    ),
    StoreGauge(
        "chessboard_import_run_duration_seconds",
        "Age of the oldest Running import run (now - started_at; 0 when none)",
        "metrics",
        "import_run_duration",
    ),
    StoreGauge("chessboard_recalc_queue_depth", "Rows in project_recalc_requests", "recalc", "queue_depth"),
    StoreGauge(
        "chessboard_recalc_due_backlog",
        "Recalc rows already due (due_at <= now), poison rows excluded",
        "recalc",
        "due_backlog",
    ),
    StoreGauge(
        "chessboard_recalc_held_rows",
        "Recalc rows held by a live Running import run (not in the due backlog until the run ends; "
        "a dead run's rows are)",
        "recalc",
        "held_count",
    ),
    StoreGauge(
        "chessboard_recalc_poison_rows",
        "Recalc rows with attempt_count >= the poison threshold",
        "recalc",
        "poison_count",
    ),
    StoreGauge(
        "chessboard_outbox_backlog", "Outbox rows not yet acknowledged by Kafka", "metrics", "outbox_backlog"
    ),
    StoreGauge(
        "chessboard_outbox_lag_seconds",
        "Age of the oldest unpublished outbox row",
        "metrics",
        "outbox_lag_seconds",
    ),
)
STORE_UP = "chessboard_store_up"

# name -> value of every store gauge, read in one go (raises when the store is unreachable)
ReadStoreGauges = Callable[[], Mapping[str, float]]


# (kind, sample key, value) of every stored sample, live gauges of gone processes left out
ReadSamples = Callable[[], Iterable[tuple[str, str, float]]]


class SampleCollector(Collector):
    """The stored samples, plus a zero for every metric no process has recorded yet (a counter's
    `initial` label sets, a label-less histogram's buckets, a label-less gauge): the dashboard
    and `increase()` see every series of a fresh deployment from the start. An unreachable store
    exposes the zeros only (chessboard_store_up says why)."""

    def __init__(self, read: ReadSamples) -> None:
        self.read = read

    def collect(self) -> Iterator[Metric]:
        try:
            rows = list(self.read())
        except Exception as error:  # noqa: BLE001 - a scrape must not fail
            log.warning("metric samples unavailable: %s", type(error).__name__)
            rows = []
        families = {family.name: family for family in families_of(rows)}
        for metric in metrics.ALL:
            name = metric.family if isinstance(metric, metrics.Counter) else metric.name
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, metric.documentation, metric.kind)
            _add_zeros(family, metric)
        yield from families.values()


def families_of(rows: Iterable[tuple[str, str, float]]) -> list[Metric]:
    """Stored samples as metric families: several rows of one sample (live gauges of several
    processes) show the greatest, or the sum for counters; histogram buckets become cumulative
    and gain `_count`, as Prometheus reads them."""
    values: dict[tuple[str, str], float] = {}
    for kind, key, value in rows:
        kind = "gauge" if kind.startswith("gauge") else kind
        old = values.get((kind, key))
        values[(kind, key)] = value if old is None else (old + value if kind != "gauge" else max(old, value))
    families: dict[str, Metric] = {}
    buckets: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[float, float]]] = {}
    for (kind, key), value in sorted(values.items()):
        family_name, sample, labels, documentation = json.loads(key)
        family = families.setdefault(family_name, Metric(family_name, documentation, kind))
        if kind == "histogram" and sample.endswith("_bucket"):
            rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
            buckets.setdefault((family_name, rest), []).append((float(labels["le"]), value))
        else:
            family.add_sample(sample, labels, value)
    for (family_name, rest), bounds in buckets.items():
        total = 0.0
        for bound, count in sorted(bounds):
            total += count
            families[family_name].add_sample(
                f"{family_name}_bucket", {**dict(rest), "le": floatToGoString(bound)}, total
            )
        families[family_name].add_sample(f"{family_name}_count", dict(rest), total)
    return list(families.values())


def _add_zeros(family: Metric, metric: metrics.Counter | metrics.Histogram | metrics.Gauge) -> None:
    present = {(s.name, tuple(sorted(s.labels.items()))) for s in family.samples}

    def zero(sample: str, labels: dict[str, str]) -> None:
        if (sample, tuple(sorted(labels.items()))) not in present:
            family.add_sample(sample, labels, 0.0)

    if isinstance(metric, metrics.Counter):
        label_sets = metric.initial or (((),) if not metric.labelnames else ())
        for values in label_sets:
            zero(metric.name, dict(zip(metric.labelnames, values, strict=False)))
    elif not metric.labelnames and not family.samples:
        if isinstance(metric, metrics.Histogram):
            for bound in metric.bounds():
                zero(f"{metric.name}_bucket", {"le": floatToGoString(bound)})
            zero(f"{metric.name}_sum", {})
            zero(f"{metric.name}_count", {})
        else:
            zero(metric.name, {})


class StoreGaugeCollector(Collector):
    def __init__(self, read: ReadStoreGauges) -> None:
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(STORE_UP, "1 when the store answered the last scrape")
        try:
            values = self.read()
        except Exception as error:  # noqa: BLE001 - a scrape must not fail: report the store as down
            log.warning("store gauges unavailable: %s", type(error).__name__)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        for gauge in STORE_GAUGES:
            family = GaugeMetricFamily(gauge.name, gauge.documentation)
            family.add_metric([], float(values[gauge.name]))
            yield family


# dead letters waiting to be replayed, per consumer (events/dead_letter_listing.py): read from the
# broker by a watch of `metrics serve` (never during a scrape), the alert CHESSBOARD_CONSUMER_DEAD_LETTERS
DEAD_LETTERS_WAITING = "chessboard_consumer_dead_letters_waiting"
DEAD_LETTERS_WAITING_HELP = (
    "Dead letters of a consumer waiting to be replayed: in its dead-letter topic past the offsets "
    "of its replay group"
)

# consumer -> waiting dead letters ({} until the broker answered once)
ReadDeadLetters = Callable[[], Mapping[str, float]]


class DeadLetterCollector(Collector):
    def __init__(self, read: ReadDeadLetters) -> None:
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(DEAD_LETTERS_WAITING, DEAD_LETTERS_WAITING_HELP, labels=["consumer"])
        try:
            values = self.read()
        except Exception as error:  # noqa: BLE001 - a scrape must not fail
            log.warning("waiting dead letters unavailable: %s", type(error).__name__)
            values = {}
        for consumer, value in sorted(values.items()):
            family.add_metric([consumer], float(value))
        yield family


def build_registry(
    read_samples: ReadSamples,
    read_store_gauges: ReadStoreGauges,
    read_dead_letters: ReadDeadLetters | None = None,
) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(SampleCollector(read_samples))
    registry.register(StoreGaugeCollector(read_store_gauges))
    if read_dead_letters is not None:
        registry.register(DeadLetterCollector(read_dead_letters))
    return registry


def exposed_names() -> set[str]:
    """Every sample name the exporter can expose: what rules and dashboards may name."""
    names = {STORE_UP, DEAD_LETTERS_WAITING, *(gauge.name for gauge in STORE_GAUGES)}
    for metric in metrics.ALL:
        names.update(metric.samples())
    return names

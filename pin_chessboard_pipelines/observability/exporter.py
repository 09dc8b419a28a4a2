"""What `pin-chessboard metrics serve --port P` exposes, in Prometheus text format.

Counters and histograms: every process that ran a job, read from the metrics folder
(multiprocess.py: the files of dead processes are compacted at each scrape). Gauges of live state:
read from PostgreSQL at each scrape (STORE_GAUGES), so no crash can leave one stuck; the caller
(cli/metrics.py) passes the function that runs their named queries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from pin_chessboard_pipelines.observability import metrics, multiprocess

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
        "1 while a talent initial import runs: a Running run with a heartbeat of its processes "
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


class FolderCollector(Collector):
    """The multiprocess folder, plus a zero for every metric no process has recorded yet (a
    counter's `initial` label sets, a label-less histogram's buckets, a label-less gauge): the
    dashboard and `increase()` see every series of a fresh deployment from the start."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def collect(self) -> Iterator[Metric]:
        families = {m.name: m for m in multiprocess.collect(self.folder)}
        for metric in metrics.ALL:
            name = metric.family if isinstance(metric, metrics.Counter) else metric.name
            family = families.get(name)
            if family is None:
                family = families[name] = Metric(name, metric.documentation, metric.kind)
            _add_zeros(family, metric)
        yield from families.values()


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


def build_registry(folder: Path, read_store_gauges: ReadStoreGauges) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(FolderCollector(folder))
    registry.register(StoreGaugeCollector(read_store_gauges))
    return registry


def exposed_names() -> set[str]:
    """Every sample name the exporter can expose: what rules and dashboards may name."""
    names = {STORE_UP, *(gauge.name for gauge in STORE_GAUGES)}
    for metric in metrics.ALL:
        names.update(metric.samples())
    return names

"""The project's metrics: names, labels and help texts as the jobs' docs name them, and how a job
process records them.

A step of a run may be a process or a pod that lives for seconds, so a process keeps no samples:
it buffers them for at most a second and adds them to the store's sums (observability/samples.py,
chessboard.metric_samples), which `pin-chessboard metrics serve` reads at each scrape. Importing
this module does nothing but define the metrics.

Rules for call sites (docs/talent-initial-import.md#metrics-logs-and-alerts):
- a counter counts what committed: increment after the transaction, from its result
  (`count_applied`), never inside it, so a rolled-back and retried page counts once;
- a gauge that describes live state (an import running, its throughput, queue depths) is read
  from PostgreSQL at scrape time (observability/exporter.py, STORE_GAUGES), so a crashed process
  cannot leave it stuck; the gauges here are either timestamps (max) or `live` gauges that
  disappear with their process.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from prometheus_client.mmap_dict import mmap_key
from prometheus_client.utils import floatToGoString

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.observability import samples


@functools.lru_cache(maxsize=8192)
def _key(
    family: str, sample: str, labelnames: tuple[str, ...], labelvalues: tuple[str, ...], doc: str
) -> str:
    """The sample's key in chessboard.metric_samples (prometheus_client's JSON of family, sample,
    labels and help); cached: building it costs more than recording the value."""
    return mmap_key(family, sample, list(labelnames), list(labelvalues), doc)


C = TypeVar("C")  # a metric's series
M = TypeVar("M", bound="_Metric[Any]")  # a series' metric

DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class _Metric(Generic[C]):
    name: str  # as exposed: a counter's ends in _total
    documentation: str
    labelnames: tuple[str, ...] = ()

    kind: ClassVar[str]

    @property
    def file_prefix(self) -> str:
        return self.kind

    def _values(self, labelvalues: Sequence[object], labelkw: dict[str, object]) -> tuple[str, ...]:
        if labelkw:
            if labelvalues:
                raise ValueError(f"{self.name}: labels positionally or by name, not both")
            if set(labelkw) != set(self.labelnames):
                raise ValueError(f"{self.name}: labels {sorted(labelkw)} != {list(self.labelnames)}")
            labelvalues = [labelkw[n] for n in self.labelnames]
        if len(labelvalues) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {list(self.labelnames)}, got {list(labelvalues)}")
        return tuple(str(v) for v in labelvalues)

    def _child(self, labelvalues: tuple[str, ...]) -> C:
        raise NotImplementedError

    def labels(self, *labelvalues: object, **labelkw: object) -> C:
        """The series of these label values (positionally or by name)."""
        return self._child(self._values(labelvalues, labelkw))

    def _unlabelled(self) -> C:
        return self._child(self._values((), {}))

    def samples(self) -> tuple[str, ...]:
        """The sample names this metric exposes (what PromQL can name)."""
        return (self.name,)


@dataclass(frozen=True)
class _Child(Generic[M]):
    """One series of a metric: the metric and its label values."""

    metric: M
    labelvalues: tuple[str, ...]


@dataclass(frozen=True)
class Counter(_Metric["_CounterChild"]):
    # label sets exposed at 0 before any process counted one: a fresh deployment's dashboard and
    # `increase()` see the series from the start (exporter.FolderCollector)
    initial: tuple[tuple[str, ...], ...] = ()

    kind: ClassVar[str] = "counter"

    @property
    def family(self) -> str:
        return self.name.removesuffix("_total")

    def _child(self, labelvalues: tuple[str, ...]) -> _CounterChild:
        return _CounterChild(self, labelvalues)

    def inc(self, amount: float = 1.0) -> None:
        self._unlabelled().inc(amount)


class _CounterChild(_Child[Counter]):
    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"{self.metric.name}: counters only go up, got {amount}")
        if amount == 0:
            return
        m = self.metric
        key = _key(m.family, m.name, m.labelnames, self.labelvalues, m.documentation)
        samples.record(m.file_prefix, [(key, amount)])


@dataclass(frozen=True)
class Histogram(_Metric["_HistogramChild"]):
    buckets: tuple[float, ...] = DEFAULT_BUCKETS

    kind: ClassVar[str] = "histogram"

    def _child(self, labelvalues: tuple[str, ...]) -> _HistogramChild:
        return _HistogramChild(self, labelvalues)

    def observe(self, value: float) -> None:
        self._unlabelled().observe(value)

    def samples(self) -> tuple[str, ...]:
        return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")

    def bounds(self) -> tuple[float, ...]:
        return (*self.buckets, math.inf)


class _HistogramChild(_Child[Histogram]):
    def observe(self, value: float) -> None:
        m = self.metric
        # every bucket is written (0 where the value does not fall) so that +Inf and the empty
        # buckets are exposed, as histogram_quantile needs
        first = next(i for i, bound in enumerate(m.bounds()) if value <= bound)
        buckets, total = _histogram_keys(m, self.labelvalues)
        items = [(key, 1.0 if i == first else 0.0) for i, key in enumerate(buckets)]
        items.append((total, value))
        samples.record(m.file_prefix, items)


@functools.lru_cache(maxsize=1024)
def _histogram_keys(m: Histogram, labelvalues: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    buckets = tuple(
        _key(
            m.name,
            f"{m.name}_bucket",
            (*m.labelnames, "le"),
            (*labelvalues, floatToGoString(b)),
            m.documentation,
        )
        for b in m.bounds()
    )
    return buckets, _key(m.name, f"{m.name}_sum", m.labelnames, labelvalues, m.documentation)


@dataclass(frozen=True)
class Gauge(_Metric["_GaugeChild"]):
    # only modes a crash cannot leave wrong: "max" for timestamps, "livemax" for values that vanish
    # with their process (samples.LIVE_SECONDS after it stopped refreshing them)
    mode: str = "livemax"

    kind: ClassVar[str] = "gauge"

    def __post_init__(self) -> None:
        if self.mode not in ("max", "livemax"):
            raise ValueError(f"{self.name}: gauge mode {self.mode!r} is neither max nor livemax")

    @property
    def file_prefix(self) -> str:
        return f"gauge_{self.mode}"

    def _child(self, labelvalues: tuple[str, ...]) -> _GaugeChild:
        return _GaugeChild(self, labelvalues)

    def set(self, value: float) -> None:
        self._unlabelled().set(value)


class _GaugeChild(_Child[Gauge]):
    def set(self, value: float) -> None:
        m = self.metric
        key = _key(m.name, m.name, m.labelnames, self.labelvalues, m.documentation)
        samples.record(m.file_prefix, [(key, float(value))])


_STAGES = tuple(entity.stage for entity in ENTITIES)


def _product(*values: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    return tuple(itertools.product(*values))


def _by_stage(name: str, documentation: str, **labels: tuple[str, ...]) -> Counter:
    """A counter by entity stage and `labels`, each of its series exposed at 0 from the start."""
    return Counter(name, documentation, ("stage", *labels), initial=_product(_STAGES, *labels.values()))


# -- talent-initial-import (docs/talent-initial-import.md#metrics-logs-and-alerts) -------------
# chessboard_import_running and chessboard_import_throughput_items_per_sec are store gauges
# (exporter.STORE_GAUGES): a killed import must not leave them at 1 / its last value.
IMPORT_PAGES = _by_stage(
    "chessboard_import_pages_total",
    "Import pages by stage and status (Failed: once, when a page fails for good)",
    status=("Planned", "Done", "Failed"),
)
IMPORT_PAGE_RETRIES = _by_stage(
    "chessboard_import_page_retries_total", "Retried failed attempts of an import page (or listing read)"
)
IMPORT_ITEMS = Counter(
    "chessboard_import_items_total",
    "Import items by aggregate and result",
    ("aggregate", "result"),
    initial=_product(tuple(entity.aggregate_type for entity in ENTITIES), ("applied", "skipped", "failed")),
)
IMPORT_PAGE_DURATION = Histogram(
    "chessboard_import_page_duration_ms",
    "Duration of one import page (fetch + apply), milliseconds",
    buckets=(10, 25, 50, 100, 250, 500, 1000, 2000, 3000, 5000, 10000, 30000),
)
IMPORT_FAILED_ITEMS = Counter(
    "chessboard_import_failed_items_total", "Items of the talent initial import quarantined"
)
# the streaming jobs' quarantines: their own series and alert (sync_alerts.yml), not the import's
SYNC_FAILED_ITEMS = Counter(
    "chessboard_sync_failed_items_total",
    "Items quarantined by a streaming sync (talent-sync, handbook-sync)",
    ("consumer",),  # not `job`: Prometheus keeps that label for the scrape target
    initial=(("talent-sync",), ("handbook-sync",)),
)
IMPORT_JOB = "talent-initial-import"
SYNC_UNKNOWN_ENUM = Counter(
    "chessboard_sync_unknown_enum_total",
    "Enum values outside the contract, replaced by the fallback",
    ("enum", "value"),
)
SYNC_UNRESOLVED_REFERENCE = Counter(
    "chessboard_sync_unresolved_reference_total", "Region/city ids the handbook does not know", ("reference",)
)

# -- project-aggregates-recalc (docs/project-aggregates-recalc.md#metrics-logs-and-alerts) -----
RECALC_PROCESS_DURATION = Histogram(
    "chessboard_recalc_process_duration_seconds",
    "Recalc of one project",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
)
RECALC_RUNS = Counter(
    "chessboard_recalc_runs_total",
    "Project recalcs by result",
    ("result",),
    initial=(("success",), ("skipped",), ("error",)),
)
RECALC_COALESCED = Counter("chessboard_recalc_coalesced_events_total", "Σ RequestedCount of drained rows")
RECALC_REPUBLISHED = Counter(
    "chessboard_recalc_republished_total",
    "Snapshot events republished",
    ("entity",),
    initial=(("project",), ("layout",), ("layout_group",)),
)
RECALC_POISON = Counter(
    "chessboard_recalc_poison_total",
    "Queue rows that reached the poison threshold (CHESSBOARD_RECALC_POISON)",
)
RECALC_LAG = Histogram(
    "chessboard_recalc_event_lag_seconds",
    "From the first request of a queue row to the commit of its recalc",
    buckets=(1, 5, 10, 20, 30, 40, 60, 120, 300, 600),
)
RECALC_TICKS = Counter("chessboard_recalc_ticks_total", "Evaluations of the recalc drain sensor")
RECALC_LAST_TICK = Gauge(
    "chessboard_recalc_last_tick_timestamp_seconds",
    "Unix time of the last recalc sensor evaluation (liveness)",
    mode="max",
)

# -- outbox relay (docs/events.md#outbox-and-relay) --------------------------------------------
OUTBOX_PUBLISHED = Counter(
    "chessboard_outbox_published_total", "Outbox messages acknowledged by Kafka", ("topic",)
)
OUTBOX_PUBLISH_ERRORS = Counter("chessboard_outbox_publish_errors_total", "Failed relay attempts")

# -- talent-sync, the streaming consumer (docs/talent-source.md#streaming-sync) ---------------
TALENT_SYNC_MESSAGES = _by_stage(
    "chessboard_talent_sync_messages_total",
    "Talent topic messages applied by the streaming sync, by stage and result",
    result=("applied", "skipped", "failed"),
)
TALENT_SYNC_LAG = Gauge(
    "chessboard_talent_sync_lag_messages",
    "Messages of the Talent topics not yet applied by the running streaming sync",
    mode="livemax",
)
TALENT_SYNC_LAG_SECONDS = Gauge(
    "chessboard_talent_sync_lag_seconds",
    "Age of the oldest Talent topic message the running streaming sync has not applied (0 = caught up)",
    mode="livemax",
)

# -- dead letters of the consumers (docs/events.md#dead-letters) -------------------------------
CONSUMER_DEAD_LETTERS = Counter(
    "chessboard_consumer_dead_letters_total",
    "Messages a consumer wrote to its dead-letter topic after they kept failing, by consumer and topic",
    ("consumer", "topic"),
)

# -- handbook-sync (docs/store.md#handbook-sync) -----------------------------------------------
HANDBOOK_SYNC_MESSAGES = Counter(
    "chessboard_handbook_sync_messages_total",
    "Handbook topic messages applied by handbook-sync, by topic and result",
    ("topic", "result"),
)
HANDBOOK_REPUBLISHED = Counter(
    "chessboard_handbook_republished_projects_total",
    "Projects republished (project-upserted, version + 1) after a region / city rename",
    ("kind",),
)
HANDBOOK_REPUBLISH_BATCH_DURATION = Histogram(
    "chessboard_handbook_republish_batch_duration_seconds",
    "One republish batch's transaction (statements and commit)",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
HANDBOOK_SYNC_LAG = Gauge(
    "chessboard_handbook_sync_lag_messages",
    "Messages of the handbook topics not yet applied by the running handbook-sync",
    mode="livemax",
)

ALL: tuple[Counter | Histogram | Gauge, ...] = tuple(
    value for value in list(globals().values()) if isinstance(value, Counter | Histogram | Gauge)
)


class AppliedResult(Protocol):
    """What count_applied reads of replica.apply.ApplyResult."""

    @property
    def quarantined(self) -> Sequence[object]: ...
    @property
    def unknown_enums(self) -> Sequence[tuple[str, str]]: ...
    @property
    def unresolved_references(self) -> Sequence[str]: ...


def count_quarantined(job: str, count: int) -> None:
    """Quarantined items of `job`: the import's own series, or the streaming sync's."""
    if job == IMPORT_JOB:
        IMPORT_FAILED_ITEMS.inc(count)
    else:
        SYNC_FAILED_ITEMS.labels(job).inc(count)


def count_applied(result: AppliedResult, job: str) -> None:
    """The apply path's counters, from the result of a committed apply (never a DryRun's) of `job`
    (IMPORT_JOB or a streaming sync's name): called after the commit, so a page rolled back and
    applied again counts once."""
    count_quarantined(job, len(result.quarantined))
    for enum, value in result.unknown_enums:
        SYNC_UNKNOWN_ENUM.labels(enum, value).inc()
    for reference in result.unresolved_references:
        SYNC_UNRESOLVED_REFERENCE.labels(reference).inc()

"""A process's metric buffer (observability/samples.py) and the families a scrape builds from the
stored samples (exporter.families_of): no database, a sink that keeps what it is given."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pin_chessboard_pipelines.observability import metrics, samples
from pin_chessboard_pipelines.observability.exporter import SampleCollector, families_of
from pin_chessboard_pipelines.observability.samples import Buffer, Key


class KeptSink:
    """Sums what is written as the store does (samples.sql `write_samples`)."""

    def __init__(self) -> None:
        self.stored: dict[tuple[str, str, str], float] = {}
        self.fail = False
        self.writes = 0

    def write(
        self, owner: str, added: Mapping[Key, float], maxed: Mapping[Key, float], live: Mapping[Key, float]
    ) -> None:
        if self.fail:
            raise ConnectionError("the store is down")
        self.writes += 1
        for (kind, key), value in added.items():
            self.stored[(kind, key, "")] = self.stored.get((kind, key, ""), 0.0) + value
        for (kind, key), value in maxed.items():
            self.stored[(kind, key, "")] = max(value, self.stored.get((kind, key, ""), value))
        for (kind, key), value in live.items():
            self.stored[(kind, key, owner)] = value

    def forget(self, owner: str) -> None:
        self.stored = {k: v for k, v in self.stored.items() if k[2] != owner}

    def rows(self) -> list[tuple[str, str, float]]:
        return [(kind, key, value) for (kind, key, _), value in self.stored.items()]


def _key(name: str, **labels: str) -> str:
    return json.dumps([name, name, labels, "help"])


def test_a_flush_writes_the_deltas_once_and_a_failed_one_keeps_them():
    sink = KeptSink()
    buffer = Buffer(sink=sink)
    buffer.record("counter", [(_key("a_total"), 2.0)])
    buffer.record("counter", [(_key("a_total"), 3.0)])
    buffer.record("gauge_max", [(_key("t"), 5.0), (_key("t"), 4.0)])
    assert buffer.flush(now=0)
    assert sink.stored == {("counter", _key("a_total"), ""): 5.0, ("gauge_max", _key("t"), ""): 5.0}
    assert buffer.flush(now=0) and sink.writes == 1  # nothing pending: no statement
    sink.fail = True
    buffer.record("counter", [(_key("a_total"), 1.0)])
    assert not buffer.flush(now=1)
    buffer.record("counter", [(_key("a_total"), 1.0)])
    sink.fail = False
    assert buffer.flush(now=2)
    assert sink.stored[("counter", _key("a_total"), "")] == 7.0  # the failed flush's delta too


def test_live_gauges_are_refreshed_and_removed_at_close():
    sink = KeptSink()
    buffer = Buffer(sink=sink, owner="pod-a:1:x")
    buffer.record("gauge_livemax", [(_key("lag"), 7.0)])
    assert buffer.flush(now=100)
    writes = sink.writes
    assert buffer.flush(now=101) and sink.writes == writes  # unchanged and fresh: not rewritten
    assert buffer.flush(now=100 + samples.LIVE_REFRESH_SECONDS) and sink.writes == writes + 1
    assert sink.stored[("gauge_livemax", _key("lag"), "pod-a:1:x")] == 7.0
    buffer.close()
    assert sink.stored == {}


def test_samples_wait_for_the_first_sink():
    buffer = Buffer()
    buffer.record("histogram", [(_key("d_bucket", le="1.0"), 1.0)])
    assert not buffer.flush()
    buffer.sink = sink = KeptSink()
    assert buffer.flush()
    assert sink.rows() == [("histogram", _key("d_bucket", le="1.0"), 1.0)]


def test_unknown_kinds_and_gauge_modes_are_refused():
    with pytest.raises(ValueError):
        Buffer().record("gauge_mostrecent", [(_key("x"), 1.0)])
    with pytest.raises(ValueError):
        metrics.Gauge("x", "doc", mode="sum")


def test_the_scrape_sums_processes_and_makes_buckets_cumulative(monkeypatch):
    """Two processes' flushes into one store, read as Prometheus reads a histogram."""
    sink = KeptSink()
    for owner in ("a:1:x", "b:2:y"):
        buffer = Buffer(sink=sink, owner=owner)
        monkeypatch.setattr(samples._PROCESS, "buffer", buffer)
        metrics.RECALC_RUNS.labels(result="success").inc(2)
        metrics.RECALC_PROCESS_DURATION.observe(0.003)
        metrics.RECALC_PROCESS_DURATION.observe(3.0)
        metrics.TALENT_SYNC_LAG.set(7 if owner.startswith("a") else 9)
        assert buffer.flush()
    registry = CollectorRegistry()
    registry.register(SampleCollector(sink.rows))
    exposed = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    assert exposed[("chessboard_recalc_runs_total", (("result", "success"),))] == 4
    assert exposed[("chessboard_recalc_runs_total", (("result", "error"),))] == 0  # declared, at 0
    duration = "chessboard_recalc_process_duration_seconds"
    assert exposed[(f"{duration}_bucket", (("le", "0.005"),))] == 2
    assert exposed[(f"{duration}_bucket", (("le", "2.0"),))] == 2
    assert exposed[(f"{duration}_bucket", (("le", "5.0"),))] == 4
    assert exposed[(f"{duration}_bucket", (("le", "+Inf"),))] == 4
    assert exposed[(f"{duration}_count", ())] == 4
    assert exposed[(f"{duration}_sum", ())] == pytest.approx(6.006)
    assert exposed[("chessboard_talent_sync_lag_messages", ())] == 9  # the greatest live process


def test_families_of_nothing_is_nothing():
    assert families_of([]) == []


def test_importing_metrics_changes_no_environment():
    code = (
        "import os; before = dict(os.environ); "
        "import pin_chessboard_pipelines.observability.metrics, pin_chessboard_pipelines.observability.exporter; "
        "assert dict(os.environ) == before; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True)
    assert done.stdout.strip() == "ok", done.stderr


def test_labels_are_checked():
    with pytest.raises(ValueError):
        metrics.RECALC_RUNS.labels("a", "b")
    with pytest.raises(ValueError):
        metrics.IMPORT_PAGES.labels(stage="Projects")

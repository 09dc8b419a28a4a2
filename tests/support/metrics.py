"""The value of a metric sample as `metrics serve` would expose it from a store: this test
process's pending samples are flushed there first."""

from __future__ import annotations

from pin_chessboard_pipelines.observability import samples
from pin_chessboard_pipelines.observability.exporter import families_of
from pin_chessboard_pipelines.store.metric_samples import read_samples, store_sink


def sample_value(url: str, name: str, **labels: str) -> float:
    samples.install(store_sink(url))
    assert samples.flush(), "the samples were not written"
    for family in families_of(read_samples(url)):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0

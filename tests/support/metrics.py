"""The value of a metric sample as `metrics serve` would expose it from this test process's folder."""

from __future__ import annotations

from pin_chessboard_pipelines.observability import multiprocess


def sample_value(name: str, **labels: str) -> float:
    for family in multiprocess.collect(multiprocess.directory()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0

"""One scheme for the parallel steps of a run (the import's page steps, the recalc's drains).

The graph holds `most` worker steps, fixed when the definitions load whatever the environment, so
its shape, and a re-execution's run config, never change with it. A first step has one optional
output per worker and yields as many as the run asks for; Dagster skips the workers whose output
was not yielded. How many work is the run's config, read when the run starts.
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg

OUTPUT_PREFIX = "process_"


def output_name(index: int) -> str:
    """The first step's output that starts worker `index`."""
    return f"{OUTPUT_PREFIX}{index}"


def worker_outputs(most: int) -> dict[str, dg.Out]:
    """The first step's outputs: one per worker, each optional."""
    return {output_name(index): dg.Out(dg.Nothing, is_required=False) for index in range(most)}


def start_workers(count: int, most: int) -> Iterator[dg.Output]:
    """The outputs that start the first `count` workers (at most `most`)."""
    for index in range(min(count, most)):
        yield dg.Output(None, output_name(index))

"""One scheme for the parallel steps of a run (the import's page steps, the recalc's drains).

The graph holds `most` worker steps, fixed when the definitions load whatever the environment, so
its shape, and a re-execution's run config, never change with it. A first step has one optional
output per worker and yields as many as the run asks for; Dagster skips the workers whose output
was not yielded. How many work is the run's config, read when the run starts; `concurrent_steps_config` lets
that many run at once on the run's executor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg

from pin_chessboard_pipelines.settings import load_dagster_executor

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


def concurrent_steps_config(steps: int, name: str | None = None) -> dict[str, Any]:
    """Run config under which `steps` steps of one run go at once (an import's P page steps, a
    recalc run's N drains): the multiprocess executor runs one step per CPU unless told, so P = 3
    on a 2-CPU host would run 2 and start the third when the stage is over. in_process runs one
    step at a time whatever it is told; k8s sets no limit of its own."""
    name = load_dagster_executor() if name is None else name
    if name != "multiprocess" or steps <= 1:
        return {}
    return {"execution": {"config": {"max_concurrent": steps}}}

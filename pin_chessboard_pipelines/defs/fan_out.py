"""One scheme for the parallel steps of a run (the import's page steps, the recalc's extra drains).

A first step has a dynamic output (`dg.DynamicOut`) and yields one `dg.DynamicOutput` per worker the
run asks for; the worker op is mapped over it (`.map`) and, where a step waits for all of them,
collected (`.collect`). A run therefore holds the steps it starts and no other: no worker shows as
"Not executed". The worker's step key ends in its mapping key, `<op>[<index>]`, and the step reads
its index back from it (`worker_index`). How many work is the run's config, read when the run
starts; the graph, and a re-execution's run config, never change with it.

A re-execution from failure starts again, under their mapping keys, the workers of its parent run
that did not succeed (failed, or interrupted when the run's process died); Dagster keeps the
parent's dynamic outputs for them (dagster/_core/execution/plan/state.py).
`concurrent_steps_config` lets that many run at once on the run's executor.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg

from pin_chessboard_pipelines.settings import load_dagster_executor


def worker_out(description: str, *, may_start_none: bool = False) -> dg.DynamicOut:
    """The first step's output: one dynamic output per worker, no value (no IO manager).
    `may_start_none`: the step may start no worker at all (the recalc's one-drain run); the output
    is then not required, so Dagster neither emits an implicit one (a log line of its own, "Emitting
    implicit Nothing ...", on every such run's console) nor plans a mapped step."""
    return dg.DynamicOut(dg.Nothing, description=description, is_required=not may_start_none)


def start_workers(count: int, most: int, first: int = 0) -> Iterator[dg.DynamicOutput]:
    """The outputs that start workers `first` .. `count - 1` (at most `most` workers in all)."""
    for index in range(first, min(count, most)):
        yield dg.DynamicOutput(None, mapping_key=str(index))


def worker_index(context: dg.OpExecutionContext | dg.AssetExecutionContext) -> int:
    """The index of a mapped worker step, from its mapping key (0 for a step that is not mapped)."""
    op_context = context.op_execution_context if isinstance(context, dg.AssetExecutionContext) else context
    key = op_context.get_mapping_key()
    return int(key) if key is not None else 0


def worker_step_key(op: str, index: int) -> str:
    """The step key of worker `index` of the mapped op `op` (its handle, for a graph's op)."""
    return f"{op}[{index}]"


def concurrent_steps_config(steps: int, name: str | None = None) -> dict[str, Any]:
    """Run config under which `steps` steps of one run go at once (an import's P page steps, a
    recalc run's N drains): the multiprocess executor runs one step per CPU unless told, so P = 3
    on a 2-CPU host would run 2 and start the third when the stage is over. in_process runs one
    step at a time whatever it is told; k8s sets no limit of its own."""
    name = load_dagster_executor() if name is None else name
    if name != "multiprocess" or steps <= 1:
        return {}
    return {"execution": {"config": {"max_concurrent": steps}}}

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
"""

from __future__ import annotations

from collections.abc import Iterator

import dagster as dg


def worker_out(description: str) -> dg.DynamicOut:
    """The first step's output: one dynamic output per worker, no value (no IO manager)."""
    return dg.DynamicOut(dg.Nothing, description=description)


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

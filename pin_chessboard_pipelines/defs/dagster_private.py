"""Dagster's private names the project relies on, imported here and nowhere else: a Dagster upgrade
that moves one breaks this module only."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.execution.build_resources import wrap_resources_for_execution
from dagster._core.execution.resources_init import get_transitive_required_resource_keys

capture_interrupts: Callable[[], AbstractContextManager[None]] | None
check_captured_interrupt: Callable[[], bool] | None
try:
    from dagster._utils.interrupts import capture_interrupts, check_captured_interrupt
except ImportError:  # pragma: no cover - a Dagster without the helper: interrupts stay abrupt
    capture_interrupts = check_captured_interrupt = None

__all__ = [
    "DagsterExecutionInterruptedError",
    "capture_interrupts",
    "check_captured_interrupt",
    "get_transitive_required_resource_keys",
    "wrap_resources_for_execution",
]

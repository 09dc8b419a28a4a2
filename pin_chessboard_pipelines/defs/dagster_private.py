"""Dagster's private names the project relies on, imported here and nowhere else: a Dagster upgrade
that moves one breaks this module only."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.executor_definition import MULTI_PROC_CONFIG
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._core.execution.api import execute_run
from dagster._core.execution.build_resources import wrap_resources_for_execution
from dagster._core.execution.resources_init import get_transitive_required_resource_keys
from dagster._core.origin import JobPythonOrigin
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

capture_interrupts: Callable[[], AbstractContextManager[None]] | None
check_captured_interrupt: Callable[[], bool] | None
try:
    from dagster._utils.interrupts import capture_interrupts, check_captured_interrupt
except ImportError:  # pragma: no cover - a Dagster without the helper: interrupts stay abrupt
    capture_interrupts = check_captured_interrupt = None

__all__ = [
    "AssetCheckEvaluationTargetMaterializationData",
    "AssetGraph",
    "DagsterExecutionInterruptedError",
    "JobPythonOrigin",
    "LoadableTargetOrigin",
    "MULTI_PROC_CONFIG",
    "ManagedGrpcPythonEnvCodeLocationOrigin",
    "ReconstructableRepository",
    "RemoteJobOrigin",
    "RemoteRepositoryOrigin",
    "UnresolvedAssetJobDefinition",
    "capture_interrupts",
    "check_captured_interrupt",
    "execute_run",
    "get_transitive_required_resource_keys",
    "wrap_resources_for_execution",
]

"""Dagster's private names the project relies on, imported here and nowhere else: a Dagster upgrade
that moves one breaks this module only. Each import is one name, with one comment line above it
saying why no public route serves and which Dagster issue asks for one
(tests/unit/test_dagster_private.py keeps the list and the rest of the package clean)."""

from __future__ import annotations

# the type of the public AssetCheckEvaluation's target_materialization_data, not exported: without it a runless evaluation is matched to its materialization by timestamps of two clocks (no issue found)
from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

# with_job_resources: the asset graph as defined, to resolve each asset job against only the resources it needs (https://github.com/dagster-io/dagster/issues/8780)
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph

# a CLI run of the code location's job, re-executable from the UI: execute_job's runs carry no remote origin (https://github.com/dagster-io/dagster/issues/19458)
from dagster._core.definitions.reconstruct import ReconstructableRepository

# with_job_resources: an asset job resolved against a chosen set of resources (https://github.com/dagster-io/dagster/issues/8780)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

# a CLI run executed in this process with its remote origin set (https://github.com/dagster-io/dagster/issues/19458)
from dagster._core.execution.api import execute_run

# with_job_resources: the Definitions' resources as Dagster binds them, to follow their dependencies (https://github.com/dagster-io/dagster/issues/8780)
from dagster._core.execution.build_resources import wrap_resources_for_execution

# with_job_resources: the resources a job needs, through the resources' own dependencies (https://github.com/dagster-io/dagster/issues/8780)
from dagster._core.execution.resources_init import get_transitive_required_resource_keys

# the bootstrap's import run: the code origin of another job of its own code location (https://github.com/dagster-io/dagster/issues/19458)
from dagster._core.origin import JobPythonOrigin
from dagster._core.remote_origin import (
    # a CLI run's code location as the workspace names it, so the UI re-executes it (https://github.com/dagster-io/dagster/issues/19458)
    ManagedGrpcPythonEnvCodeLocationOrigin,
    # the run's job in its code location, what the UI's launch sets (https://github.com/dagster-io/dagster/issues/19458)
    RemoteJobOrigin,
    # the repository of a CLI run's remote origin (https://github.com/dagster-io/dagster/issues/19458)
    RemoteRepositoryOrigin,
)

# the module a CLI run's code location loads, as workspace.yaml names it (https://github.com/dagster-io/dagster/issues/19458)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

__all__ = [
    "AssetCheckEvaluationTargetMaterializationData",
    "AssetGraph",
    "JobPythonOrigin",
    "LoadableTargetOrigin",
    "ManagedGrpcPythonEnvCodeLocationOrigin",
    "ReconstructableRepository",
    "RemoteJobOrigin",
    "RemoteRepositoryOrigin",
    "UnresolvedAssetJobDefinition",
    "execute_run",
    "get_transitive_required_resource_keys",
    "wrap_resources_for_execution",
]

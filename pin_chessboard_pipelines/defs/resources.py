"""The one resource every domain's assets, jobs and sensors use: settings and the store engine.

Built from environment variables when Dagster builds the definitions, never at import time.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.defs.dagster_private import (
    AssetCheckEvaluationTargetMaterializationData,
    AssetGraph,
    UnresolvedAssetJobDefinition,
    get_transitive_required_resource_keys,
    wrap_resources_for_execution,
)
from pin_chessboard_pipelines.events.fast_path import relay_after_commit
from pin_chessboard_pipelines.events.outbox import pending_summary
from pin_chessboard_pipelines.observability import samples
from pin_chessboard_pipelines.observability.tracing import configure_tracing
from pin_chessboard_pipelines.runtime.services import missing_database_url
from pin_chessboard_pipelines.settings import Settings, load_settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.metric_samples import store_sink

EVENTS_ASSET = "pin_chessboard_events"  # the pin.chessboard.*.v1 topics (defs/outbox)
LAG_CHECK = "outbox_lag_within_slo"
# the catalog shows a change within 1 minute (seed 003): the relay gets half of it
LAG_SLO_SECONDS = 30.0  # (docs/events.md#outbox-and-relay, outbox_alerts.yml)


class ChessboardResource(dg.ConfigurableResource):
    """Settings from the environment (settings.py) and an engine on CHESSBOARD_DATABASE_URL.

    `database_url` overrides the environment (tests point it at their own database). Neither set:
    the resource refuses to initialise (one line naming the variable), never a scratch server.
    """

    database_url: str | None = None

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Once per process that runs a job or a sensor with this resource: the store's URL checked,
        traces (README "Traces"), the process's metric samples flushed to the store every second
        and when the process exits (observability/samples.py). No teardown: a resource with one
        is a generator, which sensors' callers would have to open as a context manager."""
        samples.install(store_sink(self.url))
        configure_tracing(self.settings)

    @cached_property
    def settings(self) -> Settings:
        return load_settings()

    @cached_property
    def url(self) -> str:
        url = self.database_url or self.settings.database_url
        if not url:
            raise missing_database_url()
        return url

    @cached_property
    def engine(self) -> Engine:
        """One engine (and pool) of the store per resource and process."""
        return get_engine(self.url)

    def relay_outbox(self, context: dg.OpExecutionContext | dg.AssetExecutionContext) -> None:
        """The outbox fast path after a job's commits (the relay sensor sweeps whatever is left);
        what it published is a materialization of pin_chessboard_events."""
        result = relay_after_commit(self.engine, self.settings.kafka_bootstrap_servers)
        if result is not None:
            context.log.info(
                f"outbox fast path: {result.published} messages published in {result.seconds:.2f}s"
            )
            if result.published:
                self.log_published(context, result.published, result.seconds, "fast path")

    def log_published(
        self,
        context: dg.OpExecutionContext | dg.AssetExecutionContext,
        published: int,
        seconds: float,
        path: str,
        **metadata: Any,
    ) -> None:
        """A materialization of pin_chessboard_events and, right after it, the evaluation of its
        outbox_lag_within_slo check on it: every materialization has its check evaluated."""
        context.log_event(events_published(published, seconds, path, **metadata))
        self.report_lag(context, path)

    def report_lag(self, context: dg.OpExecutionContext | dg.AssetExecutionContext, path: str) -> None:
        """outbox_lag_within_slo evaluated now on the latest materialization of the events, as an
        event of its own (not of the run): Dagster keeps one check row per run and shows the newest
        row, so a long run's later evaluation would hide behind a shorter run's, and the latest
        publish would read "Not evaluated"."""
        target = latest_materialization(context.instance, dg.AssetKey(EVENTS_ASSET))
        evaluation = lag_evaluation(pending_summary(self.engine), f"{path}, run {context.run.run_id}", target)
        context.instance.report_runless_asset_event(evaluation)


def latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey
) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The latest materialization of `key` as the target of a check evaluation (by its storage id,
    whatever the clocks of Dagster's database and this host); None before the first one."""
    records = instance.fetch_materializations(key, limit=1).records
    if not records:
        return None
    latest = records[0]
    return AssetCheckEvaluationTargetMaterializationData(
        run_id=latest.run_id, storage_id=latest.storage_id, timestamp=latest.timestamp
    )


def _unbound_asset_graph(defs: dg.Definitions) -> AssetGraph:
    """The asset graph of `defs` as its assets and checks are defined, without resources."""
    assets = [
        dg.AssetsDefinition(specs=[a]) if isinstance(a, dg.AssetSpec) else a
        for a in [*(defs.assets or []), *(defs.asset_checks or [])]
    ]
    return AssetGraph.from_assets(assets)  # type: ignore[arg-type]


def events_published(published: int, seconds: float, path: str, **metadata: Any) -> dg.AssetMaterialization:
    """A publish to the pin.chessboard topics, whichever path did it (a job's fast path, the relay job)."""
    return dg.AssetMaterialization(
        asset_key=EVENTS_ASSET,
        description=f"{published} event(s) published by the {path}",
        metadata={
            "published": dg.MetadataValue.int(published),
            "duration_seconds": dg.MetadataValue.float(round(seconds, 3)),
            "messages_per_second": dg.MetadataValue.float(
                round(published / seconds, 1) if seconds > 0 else 0.0
            ),
            "path": dg.MetadataValue.text(path),
            **metadata,
        },
    )


def lag_evaluation(
    summary: dict[str, float],
    evaluated_by: str | None = None,
    target: AssetCheckEvaluationTargetMaterializationData | None = None,
) -> dg.AssetCheckEvaluation:
    """outbox_lag_within_slo on the outbox's pending summary (events/outbox.pending_summary): the
    oldest row not yet on Kafka is younger than LAG_SLO_SECONDS."""
    age = summary["oldest_age_seconds"]
    passed = age < LAG_SLO_SECONDS
    backlog = int(summary["backlog"])
    return dg.AssetCheckEvaluation(
        asset_key=dg.AssetKey(EVENTS_ASSET),
        check_name=LAG_CHECK,
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{backlog} pending row(s), the oldest {age:.0f}s old (SLO {LAG_SLO_SECONDS:.0f}s)"
            if backlog
            else "no pending outbox row"
        ),
        metadata={
            "backlog": dg.MetadataValue.int(backlog),
            "oldest_pending_age_seconds": dg.MetadataValue.float(round(age, 3)),
            **({"evaluated_by": dg.MetadataValue.text(evaluated_by)} if evaluated_by else {}),
        },
        target_materialization_data=target,  # the materialization it is about (not by timestamps)
    )


def with_job_resources(defs: dg.Definitions) -> dg.Definitions:
    """`defs` with each job bound to the resources its ops (or its assets and checks) require, and to
    no other: Definitions binds every top-level resource to a job that lacks one (an asset job is
    resolved against all of them), so each launchpad listed, and asked for, every other job's
    resource config. An asset job is resolved here, against the asset graph as defined (no resource
    bound to an asset yet), once with every resource to learn what its assets and checks require,
    then with those only; the implicit asset job of Materialize keeps them all (it holds every
    asset). Schedules and sensors that hold a job get the bound one."""
    resources = wrap_resources_for_execution(defs.resources or {})
    bound: dict[str, dg.JobDefinition] = {}
    asset_graph = None
    for job in defs.jobs or []:
        if isinstance(job, dg.JobDefinition):
            available = {**resources, **job.resource_defs}  # the job's own ones win, as in Definitions
            keys = get_transitive_required_resource_keys(job.required_resource_keys, available)
            bound[job.name] = job.with_top_level_resources({k: available[k] for k in sorted(keys)})
        elif isinstance(job, UnresolvedAssetJobDefinition):
            # the graph of the assets as defined, before Definitions binds resources to each of them
            # (a job merges in the resources of every asset of its graph, upstream ones included)
            asset_graph = asset_graph or _unbound_asset_graph(defs)
            resolved = job.resolve(asset_graph=asset_graph, resource_defs=resources)
            keys = get_transitive_required_resource_keys(
                resolved.required_resource_keys, resolved.resource_defs
            )
            bound[job.name] = job.resolve(
                asset_graph=asset_graph,
                resource_defs={k: resources[k] for k in sorted(keys) if k in resources},
            )

    def rebound(targets: list[Any]) -> list[Any]:
        return [bound.get(getattr(t, "name", ""), t) for t in targets]

    schedules = [
        s.with_updated_job(bound[s.job_name])
        if isinstance(s, dg.ScheduleDefinition) and s.has_job and s.job_name in bound
        else s
        for s in defs.schedules or []
    ]
    sensors = [
        s.with_updated_jobs(rebound(list(s.jobs)))
        if s.has_jobs and any(j.name in bound for j in s.jobs)
        else s
        for s in defs.sensors or []
    ]
    return dg.Definitions(
        assets=defs.assets,
        asset_checks=defs.asset_checks,
        jobs=rebound(list(defs.jobs or [])),
        schedules=schedules,
        sensors=sensors,
        resources=defs.resources,
        executor=defs.executor,
        loggers=defs.loggers,
        metadata=defs.metadata,
    )

"""Run in a fresh interpreter by tests/k8s/test_k8s_executor.py: loads the definitions with
CHESSBOARD_DAGSTER_EXECUTOR=k8s and prints, as one JSON line, what the tests assert on:

- `run_config`: for the import and recalc jobs, whether their executor config accepts the run config
  of deploy/helm/k8s-executor-run-config.yaml (and a wrong variant of it), Dagster's own validation;
- `step_job`: the body of the Kubernetes Job that dagster-k8s's K8sStepHandler creates for the
  recalc job's step, with the run launcher and the code location configured as deploy/helm/values.yaml
  configures them, captured at the API client (no cluster: the kubeconfig names an unused URL).

A process of its own because the Kubernetes client keeps its configuration in module globals.

    python -m tests.k8s.k8s_probe VALUES_YAML RUN_CONFIG_YAML KUBECONFIG
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import yaml

IMPORT_JOB = "talent_initial_import"
RECALC_JOB = "project_aggregates_recalc"
LOCATION_IMAGE = "pin-chessboard-pipelines:0.1.0"
RELEASE_NAMESPACE = "pin-chessboard"


class CapturingBatchApi:
    """Stands in for kubernetes.client.BatchV1Api: keeps the Jobs it is asked to create."""

    def __init__(self) -> None:
        self.created: list[tuple[str, Any]] = []

    def create_namespaced_job(self, body: Any, namespace: str, **_: Any) -> None:
        self.created.append((namespace, body))


def container_context(deployment: dict[str, Any]) -> dict[str, Any]:
    """What the chart passes to launched runs of a user-code deployment with
    includeConfigInLaunchedRuns (its env list, Secrets, resources, namespace)."""
    env = deployment.get("env") or []
    return {
        "k8s": {
            "image_pull_policy": deployment["image"]["pullPolicy"],
            "env_secrets": [secret["name"] for secret in deployment.get("envSecrets", [])],
            "env": env if isinstance(env, list) else [],
            "resources": deployment.get("resources") or {},
            "namespace": RELEASE_NAMESPACE,
        }
    }


def run_config_results(defs: Any, run_config: dict[str, Any]) -> dict[str, Any]:
    import dagster as dg

    wrong = {"execution": {"config": {**run_config["execution"]["config"], "max_concurrent": "many"}}}
    results: dict[str, Any] = {}
    for job_name in (IMPORT_JOB, RECALC_JOB):
        job = defs.resolve_job_def(job_name)
        results[job_name] = {"executor": job.executor_def.name}
        for label, config in (("recommended", run_config), ("wrong", wrong)):
            try:
                dg.validate_run_config(job, config)
                results[job_name][label] = "valid"
            except dg.DagsterInvalidConfigError as error:
                results[job_name][label] = "; ".join(e.message for e in error.errors)
    return results


def step_job(values: dict[str, Any], run_config: dict[str, Any], kubeconfig: str) -> dict[str, Any]:
    import dagster as dg
    from dagster_k8s.client import DagsterKubernetesClient
    from dagster_k8s.executor import _K8S_EXECUTOR_CONFIG_SCHEMA, k8s_job_executor

    from tests.support.dagster_private import (
        ExecuteStepArgs,
        PlanData,
        PlanOrchestrationContext,
        ReconstructableRepository,
        RetryMode,
        StepHandlerContext,
        create_context_free_log_manager,
        create_execution_plan,
        create_run_for_test,
        process_config,
        resolve_to_config_type,
    )

    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    recon_job = ReconstructableRepository.for_module(
        "pin_chessboard_pipelines.definitions", "defs", working_directory=os.getcwd()
    ).get_reconstructable_job(RECALC_JOB)
    job = recon_job.get_definition()
    origin = recon_job.get_python_origin()
    # the code server of the deployment reports its image and the chart's container context
    origin = origin._replace(
        repository_origin=origin.repository_origin._replace(
            container_image=LOCATION_IMAGE, container_context=container_context(deployment)
        )
    )
    launcher_config = {
        "instance_config_map": "pin-chessboard-dagster-instance",
        "service_account_name": "pin-chessboard-dagster",
        "dagster_home": "/opt/dagster/dagster_home",
        "postgres_password_secret": values["global"]["postgresqlSecretName"],
        "image_pull_policy": launcher["imagePullPolicy"],
        "load_incluster_config": False,  # no cluster: the kubeconfig below, never contacted
        "kubeconfig_file": kubeconfig,
        "env_secrets": [secret["name"] for secret in launcher["envSecrets"]],
        "fail_pod_on_run_failure": launcher["failPodOnRunFailure"],
    }
    executor_config = {
        **run_config["execution"]["config"],
        "load_incluster_config": False,
        "kubeconfig_file": kubeconfig,
    }
    with dg.instance_for_test(
        overrides={
            "run_launcher": {"module": "dagster_k8s", "class": "K8sRunLauncher", "config": launcher_config}
        }
    ) as instance:
        processed = process_config(resolve_to_config_type(_K8S_EXECUTOR_CONFIG_SCHEMA), executor_config)
        assert processed.success, processed.errors
        executor = k8s_job_executor.executor_creation_fn(
            dg.InitExecutorContext(
                job=recon_job,
                executor_def=k8s_job_executor,
                executor_config=processed.value,
                instance=instance,
            )
        )
        batch_api = CapturingBatchApi()
        handler = executor._step_handler  # the handler the executor built from its config
        handler._api_client = DagsterKubernetesClient.production_client(batch_api_override=batch_api)
        run = create_run_for_test(instance, job_name=RECALC_JOB, job_code_origin=origin)
        plan = create_execution_plan(job)
        plan_context = PlanOrchestrationContext(
            plan_data=PlanData(
                job=recon_job,
                dagster_run=run,
                instance=instance,
                execution_plan=plan,
                raise_on_error=True,
                retry_mode=RetryMode.DISABLED,
            ),
            log_manager=create_context_free_log_manager(instance, run),
            executor=executor,
            output_capture=None,
        )
        step = plan.get_step_by_key("drain_0")  # one drain step: the pod a worker runs in
        context = StepHandlerContext(
            instance=instance,
            plan_context=plan_context,
            steps=[step],
            execute_step_args=ExecuteStepArgs(origin, run.run_id, [step.key]),
        )
        events = list(handler.launch_step(context))
        (namespace, body), *rest = batch_api.created
        assert not rest
        from kubernetes.client import ApiClient

        return {
            "namespace": namespace,
            "body": ApiClient().sanitize_for_serialization(body),
            "run_id": run.run_id,
            "step_key": step.key,
            "events": [event.event_type_value for event in events],
        }


def main(values_path: str, run_config_path: str, kubeconfig: str) -> None:
    os.environ["CHESSBOARD_DAGSTER_EXECUTOR"] = "k8s"
    os.environ.setdefault("DAGSTER_HOME", tempfile.mkdtemp(prefix="k8s-probe-home-"))
    from pin_chessboard_pipelines.definitions import build_definitions

    with open(values_path) as f:
        values = yaml.safe_load(f)
    with open(run_config_path) as f:
        run_config = yaml.safe_load(f)
    result = {
        "run_config": run_config_results(build_definitions(), run_config),
        "step_job": step_job(values, run_config, kubeconfig),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:4])

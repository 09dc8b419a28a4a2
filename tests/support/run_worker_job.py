"""A Dagster run of an import whose run worker lives while none of its steps runs: a real run on the
project's multiprocess executor (`build_executor`, steps in processes of their own), tagged as an
import. Its one step writes a Running import run row of this Dagster run holding the recalc
requests of the given projects, then asks to be retried after `gap` seconds: for the retry's delay
the run worker waits and no step process exists (what a step pod waiting to be scheduled looks
like). The retry completes the import run and releases its requests.

    python -m tests.support.run_worker_job GAP PROJECT_ID:TENANT_ID ...

with CHESSBOARD_DATABASE_URL and DAGSTER_HOME (a folder: the instance's storage on disk) set. The
last line of stdout is the run's status.
"""

from __future__ import annotations

import sys
import uuid

import dagster as dg

from pin_chessboard_pipelines.defs.executors import build_executor
from pin_chessboard_pipelines.defs.talent_import.config import IMPORT_TAGS
from pin_chessboard_pipelines.recalc.debounce import RecalcReason
from pin_chessboard_pipelines.recalc.queue import enqueue_recalc, release_import_requests
from pin_chessboard_pipelines.settings import load_settings
from pin_chessboard_pipelines.store.engine import get_engine
from pin_chessboard_pipelines.store.queries import queries

DEBOUNCE, CAP = 1.0, 300.0


@dg.op(config_schema={"gap": float, "projects": [str]}, retry_policy=dg.RetryPolicy(max_retries=1))
def import_with_a_gap(context) -> None:  # noqa: ANN001 - Dagster reads the annotation
    engine = get_engine(load_settings().database_url or "")
    if context.retry_number == 0:
        run_id = uuid.uuid4()
        with engine.begin() as conn:
            conn.execute(
                queries("talent_import")["insert_run"],
                {
                    "id": run_id,
                    "mode": "ApiPull",
                    "correlation_id": context.run_id,
                    "dry_run": False,
                    "developer_id_filter": None,
                    "project_id_filter": None,
                    "page_size": 5,
                    "scopes": '[""]',
                    "dagster_run_id": context.run_id,
                },
            )
            pairs = [p.split(":") for p in context.op_config["projects"]]
            enqueue_recalc(
                conn,
                [(uuid.UUID(p), uuid.UUID(t)) for p, t in pairs],
                RecalcReason.TALENT_SYNC,
                debounce_seconds=DEBOUNCE,
                cap_seconds=CAP,
                run_id=run_id,
            )
        raise dg.RetryRequested(max_retries=1, seconds_to_wait=context.op_config["gap"])
    with engine.begin() as conn:
        row = (
            conn.execute(queries("talent_import")["run_of_dagster_run"], {"dagster_run_id": context.run_id})
            .mappings()
            .one()
        )
        run_id = row["id"]
        release_import_requests(conn, run_id, debounce_seconds=DEBOUNCE, cap_seconds=CAP)
        conn.execute(
            queries("talent_import")["end_running_run"],
            {"run_id": run_id, "status": "Completed", "error": None},
        )


@dg.job(executor_def=build_executor("multiprocess"))
def import_with_a_gap_job() -> None:
    import_with_a_gap()


def main(argv: list[str]) -> int:
    gap, projects = float(argv[0]), argv[1:]
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(
            dg.reconstructable(import_with_a_gap_job),
            instance=instance,
            run_config={"ops": {"import_with_a_gap": {"config": {"gap": gap, "projects": projects}}}},
            tags=IMPORT_TAGS,
        )
    print(result.success)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

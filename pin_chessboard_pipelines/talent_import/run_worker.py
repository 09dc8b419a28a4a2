"""An import run is alive while its run worker is (docs/talent-initial-import.md#pages-and-leases).

The run worker is the process that executes a Dagster run: the `pin-chessboard import` command, the
run pod, the multiprocess executor's parent. It lives from the run's start to its end, also while
none of its steps runs (a step pod waiting to be scheduled, a retry's delay, the next stage's step
process starting), so its heartbeat, not its steps', says whether the run still runs: a thread of
the run worker renews `worker_heartbeat_at` of the Running import run of its Dagster run every
`beat_seconds`. When the run worker dies (SIGKILL, a lost pod) the beat stops and, once it is
`IMPORT_RUN_ALIVE_SECONDS` old, the run's held recalc requests are released (recalc/queue.py) and
another import may take over; where Dagster's run monitoring watches the run it also marks it
failed, and the import's run-status sensors end the import run.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.beating import Beating

BEAT_SECONDS = 5.0


class RunWorkerHeartbeat(Beating):
    """`with RunWorkerHeartbeat(engine, dagster_run_id):` around the execution of a run's plan.

    A beat at once, then every `beat_seconds` until the block ends; a beat that fails (the store
    restarting) is tried again at the next one. The import run row may not exist yet at the first
    beats (its first step writes it): a beat renews it as soon as it does."""

    failed_event = "run-worker-heartbeat-failed"

    def __init__(self, engine: Engine, dagster_run_id: str, beat_seconds: float = BEAT_SECONDS) -> None:
        super().__init__(beat_seconds, "import-run-worker-heartbeat")
        self.engine = engine
        self.dagster_run_id = dagster_run_id

    def beat_once(self) -> bool:
        with self.engine.begin() as conn:
            runs.beat_run_worker(conn, self.dagster_run_id)
        return True

    def log_fields(self) -> dict[str, Any]:
        return {"DagsterRunId": self.dagster_run_id}

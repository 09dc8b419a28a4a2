"""The fast path: a job publishes what its transactions left right after its last commit, and never
fails for it (the relay sensor's sweep publishes what the fast path could not)."""

from __future__ import annotations

import logging

from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.events.messages import DEFAULT_MESSAGE_TIMEOUT_MS, RelayResult, broker_reachable
from pin_chessboard_pipelines.events.relay import DEFAULT_BATCH_SIZE, OutboxRelay
from pin_chessboard_pipelines.observability.logs import log_event

log = logging.getLogger(__name__)


def relay_pending(
    engine: Engine,
    bootstrap_servers: str,
    *,
    max_batches: int | None = None,
    until_empty: bool = False,
    max_seconds: float | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    wait_for_lock: bool = False,
    message_timeout_ms: int = DEFAULT_MESSAGE_TIMEOUT_MS,
) -> RelayResult:
    """The fast path a job calls right after its commit: publish what is pending, then return.

    If another relay is active (`lock_busy`), it will publish these rows too; if the broker is
    down, the rows stay pending and the relay sensor's sweep retries them.
    """
    with OutboxRelay(
        engine, bootstrap_servers, batch_size=batch_size, message_timeout_ms=message_timeout_ms
    ) as relay:
        return relay.relay_pending(
            until_empty=until_empty,
            max_batches=max_batches,
            max_seconds=max_seconds,
            wait_for_lock=wait_for_lock,
        )


def relay_after_commit(
    engine: Engine, bootstrap_servers: str, *, message_timeout_ms: int = 5000
) -> RelayResult | None:
    """The fast path for a job's last step: publish what its transactions left, never fail the job.

    A broker that does not accept connections costs milliseconds (the relay sensor's sweep picks
    the rows up later); any other failure is logged and leaves the rows pending as well.
    """
    if not broker_reachable(bootstrap_servers):
        # the relay sweep publishes them later
        log_event(
            log, logging.INFO, "outbox_fast_path_skipped", Reason="no-broker", Bootstrap=bootstrap_servers
        )
        return None
    try:
        return relay_pending(engine, bootstrap_servers, message_timeout_ms=message_timeout_ms)
    except Exception as error:  # noqa: BLE001 - the rows stay pending: the sweep retries them
        log_event(log, logging.WARNING, "outbox_fast_path_failed", Error=repr(error_line(error)))
        return None

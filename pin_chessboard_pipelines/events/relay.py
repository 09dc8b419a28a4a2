"""The outbox relay: `outbox_messages` rows -> Kafka, at least once, in commit order per key.

Claiming: ONE active relay at a time, under a PostgreSQL session advisory lock
(`Pin:lock:job:chessboard-outbox-relay`), rather than `FOR UPDATE SKIP LOCKED` by key. Why:

- Per-key order needs every earlier pending row of a key published before a later one. With
  SKIP LOCKED two relays split one id range between them, and relay B can publish key K's row 6000
  while relay A still holds K's row 100; avoiding that needs key-level claims that cost more SQL
  than the publishing itself. One relay reading in id order gets the order for free.
- Throughput is not the reason to run several relays: one idempotent producer does tens of
  thousands of messages a second, far above the rate the import and the recalc write rows.
- No row locks and no long transactions: writers never wait for the relay, and a relay that
  dies (crash, killed pod) drops its session and with it the lock, so a standby takes over on
  its next call. Relays that do not get the lock return at once (the fast path of a job) or wait
  for it (`--until-empty`).

Rows of one key are written under the aggregate's row lock, so their ids are in commit order.
A row is marked `published_at` only after the broker acknowledged it (delivery report), in one
UPDATE per batch; a crash between produce and mark republishes the row with the same messageId
(at least once, never lost). When some deliveries of a batch fail (broker down), acknowledged
rows of the same key that come after a failed one are left unmarked too, so the last delivery of
every key is still in commit order; the failed rows are retried first, with backoff. After a
failure the producer is rebuilt (an idempotent producer's state dies with the broker's) and the
topics are re-ensured (a broker that lost its topics gets them back with the contract's counts).
"""

from __future__ import annotations

import logging
import random
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from opentelemetry.trace import SpanKind
from sqlalchemy.engine import Connection, Engine

from pin_chessboard_pipelines.events.messages import (
    DEFAULT_MESSAGE_TIMEOUT_MS,
    RelayResult,
    held_back,
    message_value,
    producer_config,
    row_headers,
)
from pin_chessboard_pipelines.events.topics_admin import ensure_topics
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.metrics import OUTBOX_PUBLISH_ERRORS, OUTBOX_PUBLISHED
from pin_chessboard_pipelines.store.lock import AdvisoryLock
from pin_chessboard_pipelines.store.queries import queries

RELAY_LOCK = AdvisoryLock("Pin:lock:job:chessboard-outbox-relay")

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 5000
_NO_UPPER_BOUND = 2**63 - 1


class OutboxRelay:
    """Publishes pending outbox rows; keeps one producer across calls (rebuilt after a failure)."""

    def __init__(
        self,
        engine: Engine,
        bootstrap_servers: str,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        message_timeout_ms: int = DEFAULT_MESSAGE_TIMEOUT_MS,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        producer_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.engine = engine
        self.bootstrap_servers = bootstrap_servers
        self.batch_size = batch_size
        self.message_timeout_ms = message_timeout_ms
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.producer_overrides = dict(producer_overrides or {})
        self._producer: Producer | None = None
        self._topics_ready = False
        # cumulative over the relay's life (a long-lived relay's health, read by its owner)
        self.published_total = 0
        self.failed_attempts_total = 0
        self._queries = queries("outbox")

    # -- public -------------------------------------------------------------------------------

    def relay_pending(
        self,
        *,
        until_empty: bool = False,
        max_batches: int | None = None,
        max_seconds: float | None = None,
        wait_for_lock: bool = False,
        should_stop: Callable[[], bool] | None = None,
    ) -> RelayResult:
        """Publishes the rows pending now (or, `until_empty`, until none is left).

        Without `max_seconds` a failed batch ends the call (the rows stay pending for the next
        relay); with it, failures are retried with exponential backoff until the deadline.
        """
        started = time.monotonic()
        deadline = None if max_seconds is None else started + max_seconds
        stop = should_stop or (lambda: False)
        result = RelayResult()
        with self.engine.connect() as raw_conn:
            conn = raw_conn.execution_options(isolation_level="AUTOCOMMIT")
            wait = wait_for_lock or until_empty
            timeout = (None if deadline is None else max(0.0, deadline - time.monotonic())) if wait else 0

            def reset() -> None:
                conn.execute(self._queries["outbox_relay_session_reset"])

            with RELAY_LOCK.held(conn, timeout, should_stop=stop, before_release=reset) as taken:
                if not taken:
                    result.lock_busy = True
                    result.seconds = time.monotonic() - started
                    return result
                conn.execute(self._queries["outbox_relay_session"])
                self._relay_locked(conn, result, until_empty, max_batches, deadline, stop)
        result.seconds = time.monotonic() - started
        return result

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None

    def __enter__(self) -> OutboxRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop -----------------------------------------------------------------------------

    def _relay_locked(
        self,
        conn: Connection,
        result: RelayResult,
        until_empty: bool,
        max_batches: int | None,
        deadline: float | None,
        stop: Callable[[], bool],
    ) -> None:
        upto = (
            _NO_UPPER_BOUND
            if until_empty
            else int(conn.execute(self._queries["outbox_max_pending_id"]).scalar_one())
        )
        if upto == 0:
            return
        backoff = self.backoff_initial
        while True:
            outcome = self._pass(conn, upto, result, max_batches, deadline, stop)
            if outcome == "failed":
                self.failed_attempts_total += 1  # counted once the pass's acknowledged rows are marked
                if deadline is None:
                    result.failed = True
                    return
                pause = min(backoff, self.backoff_max) * random.uniform(0.8, 1.2)
                if time.monotonic() + pause >= deadline or stop():
                    result.failed = result.stopped_early = True
                    return
                log.warning("outbox relay: %s; retrying in %.1fs", result.last_error, pause)
                _sleep_unless(pause, stop)
                backoff *= 2
                continue
            backoff = self.backoff_initial
            if outcome == "stopped":
                result.stopped_early = True
                return
            if outcome == "empty" or not until_empty:
                return
            # until_empty: another pass picks up rows committed meanwhile (lower ids included)

    def _pass(
        self,
        conn: Connection,
        upto: int,
        result: RelayResult,
        max_batches: int | None,
        deadline: float | None,
        stop: Callable[[], bool],
    ) -> str:
        """One walk over the pending rows in id order: 'empty' | 'done' | 'failed' | 'stopped'.

        Pipelined: one database thread reads batch N+1 and marks batch N-1 while this thread
        produces batch N, so PostgreSQL and the producer work at the same time.
        """

        def over() -> bool:
            return (
                stop()
                or (deadline is not None and time.monotonic() >= deadline)
                or (max_batches is not None and result.batches >= max_batches)
            )

        def fetch(after: int) -> Sequence[Any]:
            params = {"after": after, "upto": upto, "limit": self.batch_size}
            return conn.execute(self._queries["outbox_pending_batch"], params).all()

        if over():
            return "stopped"
        marks: list[Future] = []
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay-db") as db:
            try:
                fetch_traced = tracing.bind(fetch)  # the database thread's spans join this relay's trace
                next_rows: Future | None = db.submit(fetch_traced, 0)
                saw_rows = False
                while next_rows is not None:
                    rows = next_rows.result()
                    if not rows:
                        return "done" if saw_rows else "empty"
                    saw_rows = True
                    result.batches += 1
                    next_rows = None if over() else db.submit(fetch_traced, rows[-1].id)
                    acked, failed_ids, error = self._send(rows)
                    held = held_back([(row.id, row.message_key) for row in rows], failed_ids)
                    to_mark = [row_id for row_id in acked if row_id not in held]
                    if to_mark:
                        marks.append(db.submit(tracing.bind(self._mark), conn, rows, to_mark, result))
                    if failed_ids:
                        result.failed_attempts += 1
                        result.last_error = error
                        OUTBOX_PUBLISH_ERRORS.inc()
                        log.warning(
                            "outbox relay: %d of %d deliveries failed (%s); %d rows stay pending",
                            len(failed_ids),
                            len(rows),
                            error,
                            len(held),
                        )
                        return "failed"
                return "stopped"
            finally:
                for mark in marks:  # every acknowledged row is marked before the pass ends
                    mark.result()

    def _send(self, rows: list[Any]) -> tuple[list[int], set[int], str | None]:
        """Produces one batch and waits for the broker: (acked ids, failed ids, error), in a span
        linked to the traces that wrote the rows (their messages carry those, not this one)."""
        if not tracing.tracing_enabled():
            return self._produce(rows)
        with tracing.span(
            "outbox.relay",
            {
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.batch.message_count": len(rows),
                "pin.outbox.topics": len({row.topic for row in rows}),
            },
            kind=SpanKind.PRODUCER,
            links=tracing.links_from_traceparents(row.traceparent_header for row in rows),
        ):
            acked, failed_ids, error = self._produce(rows)
            tracing.set_attributes({"pin.outbox.acked": len(acked), "pin.outbox.failed": len(failed_ids)})
            if error is not None:
                tracing.record_error(KafkaException(error))
            return acked, failed_ids, error

    def _produce(self, rows: list[Any]) -> tuple[list[int], set[int], str | None]:
        acked: list[int] = []
        failures: dict[int, str] = {}

        def reporter(row_id: int) -> Callable[[KafkaError | None, Any], None]:
            def on_delivery(error: KafkaError | None, _message: Any) -> None:
                if error is None:
                    acked.append(row_id)
                else:
                    failures[row_id] = error.str()

            return on_delivery

        error: str | None = None
        try:
            producer = self._ready_producer()
            for row in rows:
                value = message_value(row.payload)
                headers = row_headers(row)
                while True:
                    try:
                        producer.produce(
                            row.topic,
                            key=row.message_key.encode(),
                            value=value,
                            headers=headers,
                            on_delivery=reporter(row.id),
                        )
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.05)
            left = producer.flush(self.message_timeout_ms / 1000 + 10)
            if left:
                error = f"{left} messages not acknowledged in time"
        except (KafkaException, TimeoutError) as exc:
            error = exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else str(exc)
        if error is None and failures:
            error = next(iter(failures.values()))
        if error is not None:
            self._discard_producer()
        acked_ids = set(acked)
        failed_ids = {row.id for row in rows if row.id not in acked_ids} if error else set()
        return acked, failed_ids, error

    def _mark(self, conn: Connection, rows: list[Any], to_mark: list[int], result: RelayResult) -> None:
        conn.execute(self._queries["outbox_mark_published"], {"ids": "{" + ",".join(map(str, to_mark)) + "}"})
        marked = set(to_mark)
        by_topic: dict[str, int] = {}
        for row in rows:
            if row.id in marked:
                by_topic[row.topic] = by_topic.get(row.topic, 0) + 1
        for topic, n in by_topic.items():
            OUTBOX_PUBLISHED.labels(topic).inc(n)
        result.published += len(to_mark)
        self.published_total += len(to_mark)

    # -- producer and topics ------------------------------------------------------------------

    def _ready_producer(self) -> Producer:
        if not self._topics_ready:
            ensure_topics(self.bootstrap_servers, timeout=min(10.0, max(1.0, self.message_timeout_ms / 1000)))
            self._topics_ready = True
        if self._producer is None:
            self._producer = Producer(
                producer_config(
                    self.bootstrap_servers,
                    **{"message.timeout.ms": self.message_timeout_ms, **self.producer_overrides},
                )
            )
        return self._producer

    def _discard_producer(self) -> None:
        producer, self._producer = self._producer, None
        self._topics_ready = False
        if producer is not None:
            try:
                producer.purge()
                producer.flush(0)
            except KafkaException:
                pass


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


def broker_reachable(bootstrap_servers: str, timeout: float = 0.2) -> bool:
    """Whether any bootstrap server accepts a TCP connection (milliseconds when it is down)."""
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


def relay_after_commit(
    engine: Engine, bootstrap_servers: str, *, message_timeout_ms: int = 5000
) -> RelayResult | None:
    """The fast path for a job's last step: publish what its transactions left, never fail the job.

    A broker that does not accept connections costs milliseconds (the relay sensor's sweep picks
    the rows up later); any other failure is logged and leaves the rows pending as well.
    """
    if not broker_reachable(bootstrap_servers):
        log.info("outbox fast path skipped: no broker at %s; the relay sweep will publish", bootstrap_servers)
        return None
    try:
        return relay_pending(engine, bootstrap_servers, message_timeout_ms=message_timeout_ms)
    except Exception as error:  # the rows stay pending: the sweep retries them
        log.warning("outbox fast path failed: %s: %s", type(error).__name__, error)
        return None


def purge_published(
    engine: Engine, retention_seconds: float, *, batch_size: int = 5000, max_batches: int = 100
) -> int:
    """Deletes published rows older than the retention in bounded batches; returns how many."""
    statement = queries("outbox")["outbox_purge_published"]
    deleted = 0
    for _ in range(max_batches):
        with engine.begin() as conn:
            n = conn.execute(
                statement, {"retention_seconds": float(retention_seconds), "limit": batch_size}
            ).rowcount
        deleted += n
        if n < batch_size:
            break
    return deleted


def pending_summary(engine: Engine) -> dict[str, float]:
    """{"backlog", "max_id", "oldest_age_seconds"} of the unpublished rows."""
    with engine.connect() as conn:
        row = conn.execute(queries("outbox")["outbox_pending_summary"]).mappings().one()
    return {key: float(value) for key, value in row.items()}


def _sleep_unless(seconds: float, stop: Callable[[], bool]) -> None:
    end = time.monotonic() + seconds
    while not stop():
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.1))

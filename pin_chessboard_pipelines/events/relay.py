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
Each pass walks the primary key from the relay floor up (every row below it is published): the
floor moves only over ids whose writers have all ended, so a transaction that commits after later
ids were published still has its rows relayed (store/sql/outbox.sql, docs/events.md#outbox-and-relay).
A row is marked `published_at` only after the broker acknowledged it (no failure report once the
flush has nothing left; the producer reports failures only: relay_producer.py), in one UPDATE per
batch; a crash between produce and mark republishes the row with the same messageId (at least
once, never lost). When some deliveries of a batch fail (broker down), acknowledged
rows of the same key that come after a failed one are left unmarked too, so the last delivery of
every key is still in commit order; the failed rows are retried first, with backoff. After a
failure the producer is rebuilt (an idempotent producer's state dies with the broker's) and the
topics are re-ensured (a broker that lost its topics gets them back with the contract's counts).
A store that restarts under the relay ends its session and the lock with it: the relay waits for
the store, opens a new session, takes the lock again and goes on. Both waits follow the relay's
one failure policy (`RELAY_POLICY`, retry.py) within the call's time budget.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from sqlalchemy.engine import Connection, Engine

from pin_chessboard_pipelines.errors import OutboxDeliveryFailed, error_line
from pin_chessboard_pipelines.events.messages import (
    DEFAULT_MESSAGE_TIMEOUT_MS,
    ID,
    KEY,
    TOPIC,
    RelayResult,
    held_back,
)
from pin_chessboard_pipelines.events.relay_producer import Batch, BatchProducer, gc_paused
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.observability.metrics import OUTBOX_PUBLISH_ERRORS, OUTBOX_PUBLISHED
from pin_chessboard_pipelines.retry import FailurePolicy, FailureStreak, RetryDecision
from pin_chessboard_pipelines.stopper import Stopper
from pin_chessboard_pipelines.store.cursor import Cursor, array_literal
from pin_chessboard_pipelines.store.lock import AdvisoryLock
from pin_chessboard_pipelines.store.queries import queries

RELAY_LOCK = AdvisoryLock("Pin:lock:job:chessboard-outbox-relay")

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 20_000
_NO_UPPER_BOUND = 2**63 - 1


def relay_policy(retry_seconds: float = 600.0) -> FailurePolicy:
    """Failed deliveries and a store that restarts back off from 0.5 s, capped at 30 s, for up to
    `retry_seconds` (CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS, as the import); the call's time budget
    ends it sooner. Any other error ends the call at once."""
    return FailurePolicy(budget_seconds=retry_seconds, initial=0.5, cap=30.0, attempts=1)


RELAY_POLICY = relay_policy()


class OutboxRelay(AbstractContextManager["OutboxRelay"]):
    """Publishes pending outbox rows; keeps one producer across calls (rebuilt after a failure)."""

    def __init__(
        self,
        engine: Engine,
        bootstrap_servers: str,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        message_timeout_ms: int = DEFAULT_MESSAGE_TIMEOUT_MS,
        policy: FailurePolicy = RELAY_POLICY,
        producer_overrides: Mapping[str, Any] | None = None,
    ) -> None:
        self.engine, self.bootstrap_servers, self.policy = engine, bootstrap_servers, policy
        self.batch_size, self.message_timeout_ms = batch_size, message_timeout_ms
        self.producer_overrides = dict(producer_overrides or {})
        self._producer = BatchProducer(bootstrap_servers, message_timeout_ms, producer_overrides)
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

        Without `max_seconds` a failure ends the call (the rows stay pending for the next relay);
        with it, failed deliveries and a store that restarts are retried as `policy` decides until
        the deadline.
        """
        started = time.monotonic()
        deadline = None if max_seconds is None else started + max_seconds
        call = _Call(
            RelayResult(),
            Stopper(should_stop, deadline=deadline),
            FailureStreak(self.policy),
            deadline,
            until_empty,
            max_batches,
        )
        while True:
            try:
                self._session(call, wait_for_lock or until_empty)
                break
            except Exception as error:  # noqa: BLE001 - _wait_for_store re-raises what is not transient
                if not self._wait_for_store(call, error):
                    raise
        call.result.seconds = time.monotonic() - started
        return call.result

    def _session(self, call: _Call, wait: bool) -> None:
        """One database session: takes the relay lock and relays under it."""
        with self.engine.connect() as raw_conn:
            conn = raw_conn.execution_options(isolation_level="AUTOCOMMIT")
            timeout = call.remaining() if wait else 0

            def reset() -> None:
                conn.execute(self._queries["outbox_relay_session_reset"])

            with RELAY_LOCK.held(conn, timeout, should_stop=call.stopper, before_release=reset) as taken:
                call.result.lock_busy = not taken
                if taken:
                    conn.execute(self._queries["outbox_relay_session"])
                    self._relay_locked(conn, call)

    def _wait_for_store(self, call: _Call, error: Exception) -> bool:
        """The session failed: True after waiting when the policy retries (a new session follows),
        False when the error ends the call (no time budget, permanent, budget or deadline spent)."""
        if call.deadline is None:
            return False
        decision = call.streak.decide(error)
        if not self._pause(call, decision, error_line(error)):
            return False
        self._producer.discard()  # whatever it had in flight is sent again under the new session
        return True

    def _pause(self, call: _Call, decision: RetryDecision, error: str | None) -> bool:
        """Logs and sleeps the decision's wait; False (no sleep) when it gives up or the wait would
        outlast the deadline, or the call is stopped meanwhile."""
        wait = decision.wait
        if wait is None or call.deadline is None or time.monotonic() + wait >= call.deadline:
            return False
        log_event(
            log,
            logging.WARNING,
            "outbox_relay_retry",
            Reason=decision.reason,
            Attempt=call.streak.attempt,
            WaitSeconds=f"{wait:.1f}",
            Error=repr(error),
        )
        return call.stopper.sleep(wait)

    @property
    def longest_failed_attempt_seconds(self) -> float:
        """The longest a failed attempt takes against a broker that does not answer (down or
        frozen): the pause before it (at most the policy's cap) and a batch's send given up
        (`BatchProducer.longest_send_seconds`). A relay notices a broker that stops answering
        within about this, and counts each further failure within about as long again."""
        return self.policy.cap + self._producer.longest_send_seconds

    def prepare(self) -> None:
        """What the first batch would do first: the topics ensured, the producer connected."""
        self._producer.prepare()

    def close(self) -> None:
        self._producer.close()

    def __exit__(self, *exc: object) -> None:  # `with OutboxRelay(...) as relay:` closes it
        self.close()

    # -- the loop -----------------------------------------------------------------------------

    def _relay_locked(self, conn: Connection, call: _Call) -> None:
        result = call.result
        upto = (
            _NO_UPPER_BOUND
            if call.until_empty
            else int(conn.execute(self._queries["outbox_max_id"]).scalar_one())
        )
        while call.unmarked:  # acknowledged by the broker before the store went away
            rows, to_mark = call.unmarked[0]
            self._mark(conn, rows, to_mark, result)
            call.unmarked.pop(0)
        if upto == 0:
            return
        while True:
            outcome = self._pass(conn, upto, call)
            if outcome == "failed":
                self.failed_attempts_total += 1  # counted once the pass's acknowledged rows are marked
                decision = call.streak.decide(OutboxDeliveryFailed(result.last_error))
                if not self._pause(call, decision, result.last_error):
                    result.failed = True
                    result.stopped_early = call.deadline is not None
                    return
                continue
            call.streak.reset()
            if outcome == "stopped":
                result.stopped_early = True
                return
            if outcome == "empty" or not call.until_empty:
                return
            # until_empty: another pass picks up rows committed meanwhile (lower ids included)

    def _pass(self, conn: Connection, upto: int, call: _Call) -> str:
        """One walk over the pending rows in id order from the relay floor up: 'empty' | 'done' |
        'failed' | 'stopped'.

        Pipelined: one database thread reads batch N+1 and hands its rows to a thread that makes
        their values and headers, and another thread marks batch N-1 on a connection of its own,
        while this thread produces batch N and waits for the broker: PostgreSQL's reads and writes,
        the Python work and the broker's acknowledgements overlap.
        """
        result = call.result

        def fetch(after: int) -> tuple[list[Any], Future]:
            """The batch's rows (the next read can start from them) and their Batch, being made."""
            # plain tuples off the driver's cursor: no result-row objects for thousands of rows
            with Cursor(conn) as cur:
                cur.execute(
                    self._queries["outbox_pending_batch"],
                    {"after": after, "upto": upto, "limit": self.batch_size},
                )
                rows = cur.fetchall()
            return rows, builder.submit(tracing.bind(Batch.of), rows)

        if call.over():
            return "stopped"
        floor = self._advance_floor(conn)
        marks: list[tuple[Future, list[Any], list[int]]] = []
        with (
            # no cyclic collections during the pass: each would walk every row of the batches in
            # flight, about a tenth of the relay's CPU; the rows go by reference counting
            gc_paused(),
            _MarkConnection(self.engine, self._queries) as mark_conn,  # closed after the threads end
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay-db") as db,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay-batch") as builder,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="outbox-relay-mark") as marker,
        ):
            try:
                fetch_traced = tracing.bind(fetch)  # the database thread's spans join this relay's trace
                next_rows: Future | None = db.submit(fetch_traced, floor - 1)
                saw_rows = False
                while next_rows is not None:
                    rows, built = next_rows.result()
                    if not rows:
                        return "done" if saw_rows else "empty"
                    saw_rows = True
                    result.batches += 1
                    next_rows = None if call.over() else db.submit(fetch_traced, rows[-1][ID])
                    batch = built.result()
                    failed_ids, error = self._producer.send(batch)
                    held, to_mark = _acknowledged(rows, failed_ids)
                    if to_mark:
                        mark = marker.submit(tracing.bind(self._mark_on), mark_conn, rows, to_mark, result)
                        # marked batches let go of their rows: a pass holds a few batches, not its backlog
                        marks[:] = [m for m in marks if not (m[0].done() and m[0].exception() is None)]
                        marks.append((mark, rows, to_mark))
                    if failed_ids:
                        self._failed_batch(result, len(rows), len(failed_ids), len(held), error)
                        return "failed"
                return "stopped"
            finally:
                self._wait_for_marks(marks, call)

    def _advance_floor(self, conn: Connection) -> int:
        """The relay floor, moved up first when every transaction that could still write below its
        horizon has ended (store/sql/outbox.sql): every row below it is published."""
        drawn = conn.execute(self._queries["outbox_id_drawn"]).scalar_one()  # before the next statement's xid
        return int(conn.execute(self._queries["outbox_relay_advance_floor"], {"drawn": drawn}).scalar_one())

    @staticmethod
    def _failed_batch(result: RelayResult, rows: int, failed: int, pending: int, error: str | None) -> None:
        result.failed_attempts += 1
        result.last_error = error
        OUTBOX_PUBLISH_ERRORS.inc()
        log_event(
            log,
            logging.WARNING,
            "outbox_deliveries_failed",
            Failed=failed,
            Batch=rows,
            Pending=pending,
            Error=repr(error),
        )

    @staticmethod
    def _wait_for_marks(marks: list[tuple[Future, list[Any], list[int]]], call: _Call) -> None:
        """Every acknowledged row is marked before the pass ends; rows whose mark failed (the store
        went away) are kept for the next session, so a store restart does not republish them."""
        failure: BaseException | None = None
        for mark, rows, to_mark in marks:
            try:
                mark.result()
            except Exception as error:  # noqa: BLE001 - raised below, after the others are kept
                call.unmarked.append((rows, to_mark))
                failure = failure or error
        if failure is not None:
            raise failure

    def _mark_on(
        self, mark_conn: _MarkConnection, rows: Sequence[Any], to_mark: list[int], result: RelayResult
    ) -> None:
        self._mark(mark_conn.get(), rows, to_mark, result)

    def _mark(self, conn: Connection, rows: Sequence[Any], to_mark: list[int], result: RelayResult) -> None:
        conn.execute(self._queries["outbox_mark_published"], {"ids": array_literal(to_mark)})
        if len(to_mark) == len(rows):
            by_topic = Counter(map(itemgetter(TOPIC), rows))
        else:
            marked = set(to_mark)
            by_topic = Counter(row[TOPIC] for row in rows if row[ID] in marked)
        for topic, n in by_topic.items():
            OUTBOX_PUBLISHED.labels(topic).inc(n)
        result.published += len(to_mark)
        self.published_total += len(to_mark)


def _acknowledged(rows: Sequence[Any], failed_ids: set[int]) -> tuple[set[int], list[int]]:
    """(the rows held back: failed, or behind a failed row of their key; the ids to mark)."""
    if not failed_ids:
        return set(), list(map(itemgetter(ID), rows))
    held = held_back([(row[ID], row[KEY]) for row in rows], failed_ids)
    return held, [row[ID] for row in rows if row[ID] not in held]


class _MarkConnection:
    """The connection a pass marks rows on, opened at its first mark (a pass that finds nothing
    opens none); autocommit without waiting for the WAL flush, as the relay's own."""

    def __init__(self, engine: Engine, statements: Mapping[str, Any]) -> None:
        self._engine = engine
        self._statements = statements
        self._conn: Connection | None = None

    def get(self) -> Connection:
        if self._conn is None:
            conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(self._statements["outbox_relay_session"])
            self._conn = conn
        return self._conn

    def __enter__(self) -> _MarkConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not conn.invalidated:
                conn.execute(self._statements["outbox_relay_session_reset"])
        except Exception:  # noqa: BLE001 - the store went away: the pool drops the connection
            conn.invalidate()
        finally:
            conn.close()


@dataclass
class _Call:
    """One relay_pending call: its result, stopper (stop request, deadline) and failure streak."""

    result: RelayResult
    stopper: Stopper
    streak: FailureStreak
    deadline: float | None
    until_empty: bool
    max_batches: int | None
    # (rows, ids) the broker acknowledged whose mark failed: marked first on the next session
    unmarked: list[tuple[list[Any], list[int]]] = field(default_factory=list)

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def over(self) -> bool:
        """Stop taking batches: stopped, the deadline passed, or max_batches reached."""
        return self.stopper.stopped() or (
            self.max_batches is not None and self.result.batches >= self.max_batches
        )

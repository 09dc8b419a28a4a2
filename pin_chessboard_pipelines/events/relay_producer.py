"""The relay's side of Kafka: a batch of outbox rows made into messages, produced and
acknowledged (`BatchProducer`), with the producer kept across batches and rebuilt after a failure.

The producer reports failed deliveries only (`delivery.report.only.error`): once a flush has
nothing left, every message without a report was acknowledged. A failure of the whole batch (a
flush that times out, a client error) leaves all of it to be marked nothing.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from opentelemetry.trace import SpanKind

from pin_chessboard_pipelines.events.messages import (
    ID,
    KEY,
    MESSAGE_ID,
    PAYLOAD,
    TOPIC,
    TRACEPARENT_HEADER,
    batch_headers,
    message_values,
    producer_config,
)
from pin_chessboard_pipelines.events.topics_admin import ensure_topics
from pin_chessboard_pipelines.observability import tracing


@dataclass(frozen=True)
class Batch:
    """Rows of outbox_pending_batch with their Kafka values and headers, made off the main thread."""

    rows: Sequence[Any]
    values: list[bytes]
    headers: list[list[tuple[str, str | bytes | None]]]

    @classmethod
    def of(cls, rows: Sequence[Any]) -> Batch:
        """The rows with their messages' values and headers."""
        with gc_paused():  # tens of thousands of header tuples: no collections meanwhile
            return cls(rows, message_values([row[PAYLOAD] for row in rows]), batch_headers(rows))


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collections while a batch's objects are made (the relay's threads may overlap: the
    last one out turns the collector back on, if it was on)."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


class BatchProducer:
    """One idempotent producer for a relay's batches, rebuilt after a failure (an idempotent
    producer's state dies with the broker's), with the topics ensured before its first batch."""

    def __init__(
        self, bootstrap_servers: str, message_timeout_ms: int, overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.message_timeout_ms = message_timeout_ms
        self.overrides = dict(overrides or {})
        self._producer: Producer | None = None
        self._topics_ready = False
        self._failures: list[tuple[str | None, str]] = []  # (messageId, error) of the batch in flight

    @property
    def flush_seconds(self) -> float:
        """How long a batch's flush waits for the broker: its messages' timeout, and 10 s more for
        the reports of those that timed out."""
        return self.message_timeout_ms / 1000 + 10

    @property
    def topics_seconds(self) -> float:
        """The timeout of each request that ensures the topics (a listing, then a creation of the
        missing ones): the messages' timeout, within 1..10 s."""
        return min(10.0, max(1.0, self.message_timeout_ms / 1000))

    @property
    def longest_send_seconds(self) -> float:
        """The longest one `send` takes against a broker that does not answer (down or frozen):
        the topics ensured (two requests) and the flush given up. It then reports the batch
        failed."""
        return 2 * self.topics_seconds + self.flush_seconds

    def send(self, batch: Batch) -> tuple[set[int], str | None]:
        """Produces one batch and waits for the broker: (failed ids, error); every other row of the
        batch was acknowledged. In a span linked to the traces that wrote the rows (their messages
        carry those, not this one)."""
        rows = batch.rows
        if not tracing.tracing_enabled():
            return self._produce(batch)
        with tracing.span(
            "outbox.relay",
            {
                "messaging.system": "kafka",
                "messaging.operation.type": "send",
                "messaging.batch.message_count": len(rows),
                "pin.outbox.topics": len({row[TOPIC] for row in rows}),
            },
            kind=SpanKind.PRODUCER,
            links=tracing.links_from_traceparents(row[TRACEPARENT_HEADER] for row in rows),
        ):
            failed_ids, error = self._produce(batch)
            tracing.set_attributes(
                {"pin.outbox.acked": len(rows) - len(failed_ids), "pin.outbox.failed": len(failed_ids)}
            )
            if error is not None:
                tracing.record_error(KafkaException(error))
            return failed_ids, error

    def _produce(self, batch: Batch) -> tuple[set[int], str | None]:
        """The batch's messages, then one flush. The producer reports failed deliveries only
        (`delivery.report.only.error`): once flush has nothing left, every message without a
        report was acknowledged. Whatever goes wrong otherwise (a flush that times out, a client
        error) counts as a failure of the whole batch: nothing of it is marked."""
        rows = batch.rows
        failures = self._failures
        failures.clear()
        error: str | None = None
        try:
            producer = self._ready()
            produce = producer.produce
            for row, value, headers in zip(rows, batch.values, batch.headers, strict=True):
                try:
                    produce(row[TOPIC], value, row[KEY], headers=headers)
                except BufferError:  # the local queue is full: let deliveries drain it
                    while True:
                        producer.poll(0.05)
                        try:
                            produce(row[TOPIC], value, row[KEY], headers=headers)
                            break
                        except BufferError:
                            continue
            left = producer.flush(self.flush_seconds)
            if left:
                error = f"{left} messages not acknowledged in time"
        except (KafkaException, TimeoutError) as exc:
            error = exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else str(exc)
        if error is None and not failures:
            return set(), None
        failed_ids = self._failed_ids(rows, failures) if error is None else None
        if error is None:
            error = failures[0][1]
        self.discard()
        if failed_ids is None:
            failed_ids = {row[ID] for row in rows}
        return failed_ids, error

    @staticmethod
    def _failed_ids(rows: Sequence[Any], failures: list[tuple[str | None, str]]) -> set[int] | None:
        """The ids of the failed deliveries, by their messageId header; None when one cannot be told."""
        by_message_id = {row[MESSAGE_ID]: row[ID] for row in rows}
        ids = {by_message_id.get(message_id) for message_id, _ in failures}
        return None if None in ids else ids  # type: ignore[return-value]

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        """The producer's report of a failed delivery (only those: delivery.report.only.error)."""
        if error is None:
            return
        message_id = next((v.decode() for k, v in message.headers() or () if k == "messageId"), None)
        self._failures.append((message_id, error.str()))

    def _ready(self) -> Producer:
        if not self._topics_ready:
            ensure_topics(self.bootstrap_servers, timeout=self.topics_seconds)
            self._topics_ready = True
        if self._producer is None:
            self._producer = Producer(
                producer_config(
                    self.bootstrap_servers,
                    **{
                        "message.timeout.ms": self.message_timeout_ms,
                        "delivery.report.only.error": True,
                        "on_delivery": self._on_delivery,
                        **self.overrides,
                    },
                )
            )
        return self._producer

    def prepare(self, timeout: float = 10.0) -> None:
        """The topics ensured and the producer connected to the cluster, ahead of the first batch."""
        self._ready().list_topics(timeout=timeout)

    def close(self) -> None:
        """What is in flight is delivered (5 s at most), the producer let go."""
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None

    def discard(self) -> None:
        """The producer and what it has in flight dropped: the next batch builds a new one and
        ensures the topics again (a broker that lost its topics gets them back)."""
        producer, self._producer = self._producer, None
        self._topics_ready = False
        if producer is not None:
            try:
                producer.purge()
                producer.flush(0)
            except KafkaException:
                pass

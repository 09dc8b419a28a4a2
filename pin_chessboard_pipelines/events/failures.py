"""Whose failure it is when messages of a poll batch fail on their own (docs/events.md#dead-letters):
pure functions, the consumers' loop (events/consume_loop.py) acts on the verdict.

A batch that keeps failing for a permanent reason is applied again message by message. Then:

- a failure that says the consumer itself is broken, whatever message met it (the schema or a
  table missing, a privilege, a read-only or full store: `CONSUMER_SQLSTATE_CLASSES`), stops the
  run with its offsets where they were;
- so does a batch whose messages failed alike: messages of more than one entity failing with the
  very same error (a constraint, a trigger or a bug that refuses every row the same way) while no
  other message of their partitions applied (an item quarantined for its data does not count: it
  never reached the store);
- otherwise every message that failed is dead-lettered and the partition moves on, however small
  the batch and however many of its messages failed: a message that fails on its own while other
  messages of its partition apply, versions of one broken entity, entities failing each for a
  reason of its own, a lone message at the end of a partition.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from pin_chessboard_pipelines.errors import error_line
from pin_chessboard_pipelines.retry import error_chain

# SQLSTATE classes of a store or schema that is broken for every message alike: 28 authorization,
# 3D database, 3F schema, 42 undefined table / column / function, privilege, 25 read-only
# transaction (a standby), 53 disk full / out of memory, 58 system (I/O) error, XX internal error
CONSUMER_SQLSTATE_CLASSES = ("28", "3D", "3F", "42", "25", "53", "58", "XX")


class ErrorSignature(NamedTuple):
    """What the verdict reads of one message's error."""

    kind: str  # "SQLSTATE <code>" of the driver's error, else the exception's class name
    line: str  # its one line (errors.error_line)
    consumers: bool  # the consumer's own failure by its kind (CONSUMER_SQLSTATE_CLASSES)


class Failed(NamedTuple):
    """A message that failed on its own: its entity (topic, key), partition and error."""

    topic: str
    key: bytes | None
    error: ErrorSignature
    partition: int = 0


@dataclass(frozen=True)
class Verdict:
    dead_letters: tuple[int, ...]  # indexes into the failures: the messages to dead-letter
    consumer_failure: str | None = None  # why the consumer itself failed (nothing dead-lettered)


def sqlstate(error: BaseException) -> str | None:
    """The SQLSTATE of the driver's error `error` wraps (SQLAlchemy's `.orig`, causes), if any."""
    for e in error_chain(error):
        code = getattr(e, "pgcode", None) or getattr(e, "sqlstate", None)
        if isinstance(code, str) and code:
            return code
    return None


def error_signature(error: BaseException) -> ErrorSignature:
    code = sqlstate(error)
    kind = f"SQLSTATE {code}" if code else type(error).__name__
    consumers = code is not None and code.startswith(CONSUMER_SQLSTATE_CLASSES)
    return ErrorSignature(kind, error_line(error), consumers)


def classify_failures(
    batch_size: int, failures: Sequence[Failed], applied: Collection[tuple[str, int]] = ()
) -> Verdict:
    """The verdict on a batch of `batch_size` messages applied one by one, of which `failures`
    failed on their own and messages of the partitions `applied` (topic, partition) applied (see
    the module's docstring)."""
    if not failures:
        return Verdict(())
    broken = next((f for f in failures if f.error.consumers), None)
    if broken is not None:
        return Verdict(
            (),
            f"the store or the schema is broken ({broken.error.kind}, {broken.topic}): {broken.error.line}",
        )
    entities: dict[tuple[str, str], set[tuple[str, bytes | None]]] = {}
    for f in failures:
        entities.setdefault((f.error.kind, f.error.line), set()).add((f.topic, f.key))
    for (kind, line), alike in entities.items():
        partitions = {
            (f.topic, f.partition) for f in failures if (f.error.kind, f.error.line) == (kind, line)
        }
        if len(alike) > 1 and not partitions & set(applied):
            return Verdict(
                (),
                f"messages of {len(alike)} entities failed alike and none of their partitions applied "
                f"({kind}, {len(failures)} of {batch_size} messages failed): {line}",
            )
    return Verdict(tuple(range(len(failures))))


def failure_of(message: Any, error: BaseException) -> Failed:
    """A failed Kafka message (or dead letter) as the verdict reads it."""
    return Failed(message.topic(), message.key(), error_signature(error), int(message.partition()))


__all__ = [
    "CONSUMER_SQLSTATE_CLASSES",
    "ErrorSignature",
    "Failed",
    "Verdict",
    "classify_failures",
    "error_signature",
    "failure_of",
    "sqlstate",
]

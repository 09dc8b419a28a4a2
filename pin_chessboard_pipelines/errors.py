"""The project's errors, every error code, and the one way to turn an exception into one line.

One hierarchy: every error the package raises is a `PipelineError`, whose docstring is its
message when none is given. `ChessboardError` and its subclasses end a command with one line and
an exit code (README.md#commands); the others are caught where they are raised for (a Talent
answer that keeps failing, a batch that keeps failing, a delivery the broker did not take) and
classified by their type (retry.py)."""

from __future__ import annotations

import re
from typing import Any

from pin_chessboard_pipelines.kafka_env import redact_kafka_secrets

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2


class PipelineError(Exception):
    """The base of every error of the package."""

    def __init__(self, message: str | None = None, *args: object) -> None:
        super().__init__(message if message is not None else (self.__doc__ or "").strip(), *args)


class ChessboardError(PipelineError):
    """An error an operator reads: `CODE: message` on one line, then exit `exit_code`."""

    code: str | None = None
    exit_code: int = EXIT_REFUSED

    def __init__(self, message: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    def line(self) -> str:
        return f"{self.code}: {self}" if self.code else str(self)


class ConfigError(ChessboardError):
    """An invalid environment variable or argument."""


class Refused(ChessboardError):
    """A job refused to start (flag off, lock held, source unavailable, invalid request)."""


class KafkaRefused(Refused):
    """The broker refused this client: its TLS handshake or SASL authentication failed (a wrong CA,
    user or password). librdkafka would retry forever; the command stops instead. Its message
    starts with the code, so a Dagster step's error says it too."""

    code = "CHESSBOARD_KAFKA_REFUSED"

    def __str__(self) -> str:
        return f"{self.code}: {self.args[0]}"

    def line(self) -> str:
        return str(self)


# Error codes (docs/talent-initial-import.md#validation-quarantine-and-error-codes).
IMPORT_SOURCE_UNAVAILABLE = "CHESSBOARD_IMPORT_SOURCE_UNAVAILABLE"
IMPORT_LOCK_HELD = "CHESSBOARD_IMPORT_LOCK_HELD"
IMPORT_DISABLED = "CHESSBOARD_IMPORT_DISABLED"
IMPORT_INVALID_REQUEST = "CHESSBOARD_IMPORT_INVALID_REQUEST"
SYNC_PARENT_NOT_FOUND = "CHESSBOARD_SYNC_PARENT_NOT_FOUND"
# A layout group / layout that exists but belongs to another project than the child.
SYNC_PARENT_MISMATCH = "CHESSBOARD_SYNC_PARENT_MISMATCH"
SYNC_VALIDATION_FAILED = "CHESSBOARD_SYNC_VALIDATION_FAILED"
SYNC_DUPLICATE_NUMBER = "CHESSBOARD_SYNC_DUPLICATE_NUMBER"
SYNC_UNKNOWN_REFERENCE = "CHESSBOARD_SYNC_UNKNOWN_REFERENCE"
SYNC_STATUS_CONFLICT = "CHESSBOARD_SYNC_STATUS_CONFLICT"
# A project snapshot with another developer than the stored one: a project's owner never changes.
SYNC_IMMUTABLE_CHANGED = "CHESSBOARD_SYNC_IMMUTABLE_CHANGED"
RECALC_POISON = "CHESSBOARD_RECALC_POISON"
SYNC_LOCK_HELD = "CHESSBOARD_SYNC_LOCK_HELD"  # another talent-sync consumer runs
# The analytics gate: the recalc audit reports drift (a divergence without a pending recalc row).
AGGREGATES_DRIFT = "CHESSBOARD_AGGREGATES_DRIFT"
KAFKA_REFUSED = KafkaRefused.code

# -- the import ------------------------------------------------------------------------------


class StageFailed(ChessboardError):
    """A stage gave up after bounded retries: the run is Failed and can be resumed."""

    exit_code = EXIT_FAILED


class RunEnded(ChessboardError):
    """The import run was ended by another step of the same Dagster run (Failed or Cancelled)."""

    exit_code = EXIT_FAILED

    def __init__(self, status: str, error: str | None) -> None:
        super().__init__(f"the import run is {status}: {error or 'no error recorded'}")
        self.status = status


class RunAlive(PipelineError):
    """Another import run is Running and its run worker (or, without one, one of its processes)
    renewed its heartbeat lately."""

    def __init__(self, run: Any) -> None:  # the run's row (a RowMapping)
        super().__init__(f"import run {run['id']} (correlation id {run['correlation_id']}) is running")
        self.run = run


# -- Talent's API --------------------------------------------------------------------------------


class TalentSourceError(PipelineError):
    """Talent could not answer what was asked."""


class TalentSourceUnavailable(TalentSourceError):
    """GET /health did not answer 200."""


class TalentTransientError(TalentSourceError):
    """A request kept failing transiently until the attempts ran out."""

    def __init__(
        self, message: str, status: int | None = None, attempts: int = 0, *, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts
        self.timed_out = timed_out  # the last attempt timed out (else: 5xx, 429, a malformed body)


class TalentPermanentError(TalentSourceError):
    """A 4xx other than 429: asking again will not help."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class TalentCancelled(TalentSourceError):
    """should_stop() asked to give up while waiting to retry."""


class TalentMalformedAnswer(TalentSourceError):
    """An answer that is not the JSON the contract describes."""


class TalentTooSlow(TalentSourceError):
    """The answer was not complete by the attempt's deadline."""


class SnapshotInvalid(PipelineError):
    """A Talent snapshot that breaks a validation rule (talent-source.md): quarantined by its code."""

    def __init__(self, message: str, code: str = SYNC_VALIDATION_FAILED) -> None:
        super().__init__(message)
        self.code = code


# -- the consumers and the relay -----------------------------------------------------------------


class SyncFailed(PipelineError):
    """A talent-sync batch kept failing to apply: the run stops, its offsets stay where they were."""


class HandbookSyncFailed(PipelineError):
    """A handbook-sync batch kept failing: the run stops, offsets and pending republishes stay
    where they were."""


class DeadLetterDeliveryFailed(PipelineError):
    """A dead letter the broker did not take: the consumer stops, its offsets stay."""


class OutboxDeliveryFailed(PipelineError):
    """Deliveries of a relay batch failed (the broker is down or slow): worth another attempt."""

    retry_reason = "broker-unavailable"


class RetryStopped(PipelineError):
    """The Stopper said stop while waiting for a retry."""


# -- the inventory and the simulator -------------------------------------------------------------


class PastDayRefused(PipelineError):
    """A past day with no rows recorded on it: the replica holds only the current state."""


class DatasetError(PipelineError, ValueError):
    """An invalid dataset spec or query; the message is one line for the operator or the HTTP body."""


class UnknownCollection(DatasetError):
    """A collection the simulator does not serve."""


class InvalidQuery(DatasetError):
    """A query parameter the simulator cannot read."""


class SimulatorAnswer(PipelineError):
    """An error answer of the simulator's HTTP server: its status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# `scheme://user:password@`: the password part of any URL in a message.
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^\s/]+@")


def mask_url_passwords(text: str) -> str:
    """The text with the password of every `scheme://user:password@host` replaced by ***."""
    return _URL_PASSWORD.sub(r"\1***@", text)


def error_line(error: BaseException, limit: int | None = 1024) -> str:
    """`Type: first line of the message`, URL and Kafka passwords masked, at most `limit` characters.

    A SQLAlchemy DBAPIError speaks through the driver's error it wraps (`orig`)."""
    orig = getattr(error, "orig", None)
    if isinstance(orig, BaseException):
        error = orig
    lines = [line for line in str(error).splitlines() if line.strip()]
    text = mask_url_passwords(f"{type(error).__name__}: {lines[0].strip() if lines else ''}".strip())
    text = redact_kafka_secrets(text)
    return text if limit is None else text[:limit]

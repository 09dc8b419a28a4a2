"""Errors that end a command with one line and an exit code (README.md#commands), every
error code, and the one way to turn an exception into one line."""

from __future__ import annotations

import re

from pin_chessboard_pipelines.kafka_env import redact_kafka_secrets

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_REFUSED = 2


class ChessboardError(Exception):
    """An error an operator reads: `CODE: message` on one line, then exit `exit_code`."""

    code: str | None = None
    exit_code: int = EXIT_REFUSED

    def __init__(self, message: str, code: str | None = None) -> None:
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

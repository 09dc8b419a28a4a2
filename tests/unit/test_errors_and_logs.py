"""The one error line and the one structured log line."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

import psycopg2
from sqlalchemy.exc import DBAPIError

from pin_chessboard_pipelines.errors import error_line, mask_url_passwords
from pin_chessboard_pipelines.observability.logs import counter_fields, counters, log_event


def test_error_line_is_the_type_and_the_first_line_with_url_passwords_masked():
    error = RuntimeError("\n  cannot reach postgresql://u:pw123@db:5432/x  \nDETAIL: more")
    assert error_line(error) == "RuntimeError: cannot reach postgresql://u:***@db:5432/x"
    assert error_line(ValueError()) == "ValueError:"
    assert len(error_line(ValueError("x" * 5000))) == 1024
    assert len(error_line(ValueError("x" * 5000), limit=None)) > 1024


def test_a_sqlalchemy_error_speaks_through_the_driver_error():
    orig = psycopg2.OperationalError("server closed the connection\nCONTEXT: ...")
    wrapped = DBAPIError.instance("SELECT 1", None, orig, psycopg2.Error)
    assert error_line(wrapped) == "OperationalError: server closed the connection"


def test_mask_url_passwords_keeps_everything_but_the_password():
    assert (
        mask_url_passwords("postgresql://u:p@ss@db/x and http://h/")
        == "postgresql://u:***@db/x and http://h/"
    )
    assert mask_url_passwords("postgresql://u@db/x") == "postgresql://u@db/x"


def test_log_event_writes_key_value_pairs_and_the_fields_in_extra(caplog):
    logger = logging.getLogger("test.log_event")
    with caplog.at_level(logging.INFO, logger="test.log_event"):
        log_event(logger, logging.WARNING, "item-quarantined", RunId=1, Stage="Projects")
        log_event(logger, logging.DEBUG, "not-logged", X=1)
    [record] = caplog.records
    assert record.getMessage() == "item-quarantined RunId=1 Stage=Projects"
    assert record.event == "item-quarantined"  # type: ignore[attr-defined]
    assert record.fields == {"RunId": 1, "Stage": "Projects"}  # type: ignore[attr-defined]


class _Why(enum.Enum):
    IDLE = "idle"


@dataclass
class _Run:
    batches: int = 2
    longest_transaction_seconds: float = 0.12345
    stopped: _Why | None = _Why.IDLE
    stages: dict[str, int] = field(default_factory=lambda: {"a": 1})


def test_counters_name_fields_in_camel_case_round_floats_and_take_enum_values():
    summary = counters(_Run(), after={"batches": {"extra": 1}})
    assert list(summary) == ["batches", "extra", "longestTransactionSeconds", "stopped", "stages"]
    assert summary["longestTransactionSeconds"] == 0.123 and summary["stopped"] == "idle"
    assert counter_fields(summary, "stages") == {
        "Batches": 2,
        "Extra": 1,
        "LongestTransactionSeconds": 0.123,
        "Stopped": "idle",
    }


def _package_modules() -> list[str]:
    """Every module of the package but the entry points and the migrations (they run on import)."""
    import pkgutil

    import pin_chessboard_pipelines

    return [
        info.name
        for info in pkgutil.walk_packages(pin_chessboard_pipelines.__path__, "pin_chessboard_pipelines.")
        if not info.name.endswith("__main__") and ".migrations" not in info.name
    ]


def test_every_error_of_the_package_is_a_pipeline_error_declared_in_errors_py():
    import importlib
    import inspect

    from pin_chessboard_pipelines.errors import PipelineError

    declared = {}
    for name in _package_modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__.startswith("pin_chessboard_pipelines"):
                declared[cls.__qualname__] = cls
    assert len(declared) >= 25, sorted(declared)
    elsewhere = sorted(n for n, c in declared.items() if c.__module__ != "pin_chessboard_pipelines.errors")
    assert elsewhere == [], elsewhere
    outside = sorted(n for n, c in declared.items() if not issubclass(c, PipelineError))
    assert outside == [], outside


def test_an_error_without_a_message_says_its_docstring():
    from pin_chessboard_pipelines.errors import OutboxDeliveryFailed, RetryStopped, TalentSourceUnavailable

    assert str(TalentSourceUnavailable()) == "GET /health did not answer 200."
    assert str(RetryStopped("stopped instead of retrying: x")) == "stopped instead of retrying: x"
    assert OutboxDeliveryFailed().retry_reason == "broker-unavailable"


def test_a_field_left_out_of_the_summary_gives_its_place_to_the_entries_after_it():
    summary = counters(_Run(), after={"stopped": {"listed": 0}}, leave_out=("stopped", "stages"))
    assert list(summary) == ["batches", "longestTransactionSeconds", "listed"]

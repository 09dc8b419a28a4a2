from datetime import UTC, datetime, timedelta

from tests.support.debounce import next_due_at

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
D, CAP = timedelta(seconds=30), timedelta(minutes=5)


def test_new_request_waits_the_debounce():
    assert next_due_at(NOW, None, D, CAP) == NOW + D


def test_repeated_request_pushes_back_within_the_cap():
    first = NOW - timedelta(minutes=1)
    assert next_due_at(NOW, first, D, CAP) == NOW + D


def test_continuous_edits_are_forced_at_the_cap():
    first = NOW - timedelta(minutes=4, seconds=50)
    assert next_due_at(NOW, first, D, CAP) == first + CAP


def test_force_is_due_now():
    assert next_due_at(NOW, NOW - timedelta(minutes=1), D, CAP, force=True) == NOW

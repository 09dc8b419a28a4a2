"""The pure rules of the waiting dead letters (events/dead_letter_listing.py): how many wait past
the replay group's offsets, a dead letter's age, the operator's table."""

from __future__ import annotations

from datetime import UTC, datetime

from pin_chessboard_pipelines.events.dead_letter_listing import (
    CONSUMER_GROUPS,
    WaitingDeadLetter,
    WaitingDeadLetters,
    age_seconds,
    human_age,
    key_text,
    letters_markdown,
    waiting_from,
)
from pin_chessboard_pipelines.store.handbook import HANDBOOK_CONSUMER_GROUP
from pin_chessboard_pipelines.talent.topics import CONSUMER_GROUP

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


def test_the_consumer_groups_are_the_consumers_own():
    assert CONSUMER_GROUPS == {"talent-sync": CONSUMER_GROUP, "handbook-sync": HANDBOOK_CONSUMER_GROUP}


def test_waiting_is_past_what_the_replay_group_committed():
    assert waiting_from(0, 5, None) == (0, 5)  # never replayed: all of them
    assert waiting_from(0, 5, -1001) == (0, 5)  # librdkafka's "no offset"
    assert waiting_from(0, 5, 3) == (3, 2)
    assert waiting_from(0, 5, 5) == (5, 0)  # replayed up to the end
    assert waiting_from(2, 5, 0) == (2, 3)  # committed below what the topic still holds
    assert waiting_from(0, 0, None) == (0, 0)


def test_age_of_a_dead_letter():
    assert age_seconds("2026-12-05T08:58:30Z", NOW) == 90.0
    assert age_seconds("2026-12-05T08:58:30+00:00", NOW) == 90.0
    assert age_seconds("2026-12-05T09:00:10Z", NOW) == 0.0  # a clock ahead: never negative
    assert age_seconds("", NOW) is None and age_seconds("yesterday", NOW) is None
    assert [human_age(s) for s in (None, 5, 125, 3 * 3600 + 5 * 60, 2 * 86400 + 4 * 3600)] == [
        "?",
        "5s",
        "2m",
        "3h 05m",
        "2d 04h",
    ]


def test_keys_as_text():
    assert key_text(None) == "(none)"
    assert key_text("ключ".encode()) == "ключ"
    assert key_text(b"\xff") == "\ufffd"
    assert len(key_text(b"k" * 200)) == 80


def _letter(offset: int, error: str = "developer refused") -> WaitingDeadLetter:
    return WaitingDeadLetter(
        consumer="talent-sync",
        offset=offset,
        key="a|b",
        origin_topic="talent.chessboard.developers.v1",
        origin_partition=0,
        origin_offset=7,
        error=error,
        error_type="InternalError",
        attempts=3,
        failed_at="2026-12-05T08:58:30Z",
        age_seconds=90.0,
    )


def test_the_operators_table():
    listing = WaitingDeadLetters(
        "talent-sync", "pin-chessboard-talent-sync.dlq", 3, 1, [_letter(1), _letter(2)]
    )
    empty = WaitingDeadLetters("handbook-sync", "pin-chessboard-handbook-sync.dlq")
    table = letters_markdown([listing, empty]).splitlines()
    assert table[0] == (
        "talent-sync: 3 waiting in `pin-chessboard-talent-sync.dlq` (the first 2 listed); "
        "handbook-sync: 0 waiting in `pin-chessboard-handbook-sync.dlq`"
    )
    assert table[2].startswith("| consumer | offset | key | origin | error |")
    assert table[4] == (
        "| talent-sync | 1 | a\\|b | talent.chessboard.developers.v1[0]@7 | developer refused | 3 "
        "| 2026-12-05T08:58:30Z | 1m |"
    )
    assert len(table) == 6
    assert letters_markdown([empty]).endswith("No dead letter waits to be replayed.")
    assert _letter(1).as_dict()["originOffset"] == 7 and _letter(1).as_dict()["ageSeconds"] == 90.0
    assert _letter(1).line().startswith("dead-letter-waiting Consumer=talent-sync Offset=1 Key='a|b' ")

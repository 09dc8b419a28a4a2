"""handbook-sync's pure parts (handbook_sync/values.py) and the v1.2 project rules of the apply
path (replica/rules.py), without a database."""

from __future__ import annotations

import json

import pytest

from pin_chessboard_pipelines.handbook_sync.values import (
    HandbookValue,
    InvalidValue,
    Kind,
    decode,
    newest,
    parse,
    renames,
)
from pin_chessboard_pipelines.replica import rules
from pin_chessboard_pipelines.store.handbook import CITIES_TOPIC, REGIONS_TOPIC
from pin_chessboard_pipelines.talent_sync.consumer import oldest_message_age


def test_a_region_and_a_city_decode_from_their_topics():
    region = decode(REGIONS_TOPIC, b"77", json.dumps({"id": 77, "name": "Москва", "version": 3}).encode())
    assert region == HandbookValue(Kind.REGION, 77, "Москва", 3)
    city = decode(CITIES_TOPIC, b"1", b'{"id": 1, "regionId": 77, "name": "M", "version": 2, "extra": 1}')
    assert city == HandbookValue(Kind.CITY, 1, "M", 2, region_id=77)
    assert decode(REGIONS_TOPIC, b"77", None) is None  # a tombstone: the replica keeps the row


@pytest.mark.parametrize(
    ("kind", "key", "raw", "fragment"),
    [
        (Kind.REGION, "77", [1], "not a JSON object"),
        (Kind.REGION, "77", {"id": "77", "name": "x", "version": 1}, "id"),
        (Kind.REGION, "78", {"id": 77, "name": "x", "version": 1}, "differs from the key"),
        (Kind.REGION, "77", {"id": 77, "name": "  ", "version": 1}, "name"),
        (Kind.REGION, "77", {"id": 77, "name": "x" * 129, "version": 1}, "at most 128"),
        (Kind.REGION, "77", {"id": 77, "name": "x", "version": 0}, "version"),
        (Kind.REGION, "77", {"id": 77, "name": "x", "version": True}, "version"),
        (Kind.CITY, "1", {"id": 1, "name": "x", "version": 1}, "regionId"),
    ],
)
def test_values_that_break_the_contract_are_invalid(kind, key, raw, fragment):
    result = parse(kind, key, raw)
    assert isinstance(result, InvalidValue) and fragment in result.message and kind.topic in result.message


def test_undecodable_json_is_invalid():
    result = decode(REGIONS_TOPIC, b"77", b"{not json")
    assert isinstance(result, InvalidValue) and result.raw == "{not json"


def test_the_newest_value_of_an_id_wins_in_a_batch():
    values = [
        HandbookValue(Kind.REGION, 77, "b", 3),
        HandbookValue(Kind.REGION, 77, "a", 1),
        HandbookValue(Kind.CITY, 77, "city", 1, 77),
        HandbookValue(Kind.REGION, 16, "t", 2),
    ]
    assert newest(values) == [  # by (kind, id)
        HandbookValue(Kind.CITY, 77, "city", 1, 77),
        HandbookValue(Kind.REGION, 16, "t", 2),
        HandbookValue(Kind.REGION, 77, "b", 3),
    ]


def test_only_a_changed_name_of_a_known_id_is_a_rename():
    applied = [
        {"id": 77, "name": "Новая", "version": 2, "inserted": False, "old_name": "Москва"},
        {"id": 78, "name": "Санкт-Петербург", "version": 2, "inserted": False, "old_name": "Санкт-Петербург"},
        {"id": 91, "name": "Крым", "version": 1, "inserted": True, "old_name": None},
    ]
    (rename,) = renames(Kind.REGION, applied)
    assert (rename.id, rename.old_name, rename.new_name, rename.version) == (77, "Москва", "Новая", 2)
    assert Kind.REGION.column == "region_id" and Kind.CITY.column == "city_id"


def test_a_project_owner_change_is_refused_and_the_same_owner_is_not():
    old = {"developer_id": "d1", "tenant_id": "d1"}
    assert rules.owner_changed("project", {"developer_id": "d1"}, old) is None
    message = rules.owner_changed("project", {"developer_id": "d2"}, old)
    assert message is not None and "d2" in message and "d1" in message
    assert rules.owner_changed("project", {"developer_id": "d2"}, None) is None  # a create
    assert rules.owner_changed("building", {"developer_id": "d2"}, old) is None


def test_a_dry_run_of_a_deleted_project_stores_it_archived():
    old = {"version": 3, "status": "Published", "deleted_at": None}
    stored = rules.dry_run_row("project", {"deleted_at": "2026-12-01T00:00:00Z"}, old)
    assert (stored["status"], stored["version"]) == ("Archived", 4)
    assert rules.dry_run_row("project", {"deleted_at": None}, old)["status"] == "Published"


class _Message:
    def __init__(self, ms: int, kind: int = 1) -> None:
        self._stamp = (kind, ms)

    def timestamp(self):
        return self._stamp


def test_the_sync_lag_is_the_age_of_the_oldest_message_of_a_batch():
    now = 1_000_000.0
    messages = [_Message(int((now - 12) * 1000)), _Message(int((now - 400) * 1000)), _Message(0, kind=0)]
    assert oldest_message_age(messages, now=now) == pytest.approx(400)
    assert oldest_message_age([], now=now) == 0.0
    assert oldest_message_age([_Message(int((now + 5) * 1000))], now=now) == 0.0  # clock skew

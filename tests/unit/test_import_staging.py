"""A page's items staged in the store and read back: the same items the walker read."""

from __future__ import annotations

from decimal import Decimal

import pytest

from pin_chessboard_pipelines.talent.topic_reader import TOMBSTONE, decode_message
from pin_chessboard_pipelines.talent_import.staging import staged_items, staged_text


def test_items_come_back_equal_with_their_digits():
    items = [
        {"id": "a", "version": 3, "price": Decimal("987654321098.76543"), "totalArea": Decimal("42.50")},
        {"id": "b", "version": 9007199254740993, "name": 'Кв. 1 "угловая"', "deletedAt": None},
        {"id": "c", "extra": {"nested": [1, Decimal("1E+2"), "x"]}},
    ]
    back = staged_items(staged_text(items))
    assert back == items
    assert str(back[0]["price"]) == "987654321098.76543" and str(back[0]["totalArea"]) == "42.50"


def test_topic_items_come_back_as_they_were_decoded():
    items = [
        decode_message(b"k1", b'{"id": "k1", "version": 1, "price": 10.10}'),
        decode_message(b"k2", None),
        decode_message(b"k3", b"not json"),
    ]
    back = staged_items(staged_text(items))
    assert back == items and back[1][TOMBSTONE] is True


def test_an_empty_page_is_staged_too():
    assert staged_items(staged_text([])) == []


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1.5])
def test_a_float_is_not_staged(value):
    # only a NaN / Infinity literal of a broken source parses to a float; JSON cannot carry it
    assert staged_text([{"id": "a", "price": value}]) is None
    assert staged_text([{"id": "a", "extra": [{"x": value}]}]) is None


def test_staged_text_that_is_no_array_is_refused():
    with pytest.raises(ValueError):
        staged_items('{"id": "a"}')

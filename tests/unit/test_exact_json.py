"""Exact decimals in event JSON: the stored digits, never a binary float."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pin_chessboard_pipelines.events.exact_json import compact, dumps, loads, number


def test_the_contract_example_keeps_every_digit():
    price = Decimal("987654321098.76543")
    assert float(price) != price  # a double cannot hold it
    text = dumps({"price": number(price)})
    assert text == '{"price":987654321098.76543}'
    assert loads(text) == {"price": price}


def test_integral_values_are_ints_and_others_keep_their_digits():
    assert number(Decimal("100.00")) == 100 and isinstance(number(Decimal("100.00")), int)
    assert (
        dumps([number(Decimal("0.10")), number(Decimal("12.5")), number(Decimal("-3.25"))])
        == "[0.10,12.5,-3.25]"
    )
    assert dumps({"a": Decimal("1E-7")}) == '{"a":1E-7}'
    assert json.loads(dumps({"a": Decimal("1E-7")})) == {"a": 1e-07}


def test_compact_utf8_and_strings_that_look_like_numbers_stay_strings():
    value = {"name": "Дом «Север»", "number": "12.50", "nested": {"min": Decimal("1.5"), "max": None}}
    assert dumps(value) == '{"name":"Дом «Север»","number":"12.50","nested":{"min":1.5,"max":null}}'


def test_jsonb_text_is_compacted_with_its_digits():
    assert compact('{"price": {"min": 987654321098.76543, "max": 1000000000000}, "ok": true}') == (
        '{"price":{"min":987654321098.76543,"max":1000000000000},"ok":true}'
    )


def test_no_float_and_no_nan():
    with pytest.raises(ValueError):
        dumps({"a": Decimal("NaN")})
    with pytest.raises(ValueError):
        number(Decimal("Infinity"))


@given(st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**12), max_value=10**12, places=5))
def test_any_price_round_trips_exactly(price):
    assert loads(dumps({"p": price}))["p"] == price
    assert Decimal(dumps(price)) == price


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON)
def test_the_text_is_the_standard_compact_utf8_json(value):
    # what consumers read before orjson wrote the payloads: escapes, key order and separators alike
    assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_what_has_no_json_form_is_a_type_error():
    with pytest.raises(TypeError):
        dumps({"a": object()})

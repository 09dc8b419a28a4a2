"""The daily inventory computation (analytics/inventory.py): pandas frames in, one row per project out."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pin_chessboard_pipelines.analytics.inventory import (
    NAME_COLUMN,
    TABLE_COLUMNS,
    DaySource,
    day_source,
    day_totals,
    free_prices,
    price_units,
    project_inventory,
    top_projects_markdown,
)
from pin_chessboard_pipelines.errors import PastDayRefused
from tests.support.aggregates import project_aggregates

DAY = date(2026, 11, 30)
AT = datetime(2026, 11, 30, 23, 50, tzinfo=UTC)


def _projects(*names: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "n": range(1, len(names) + 1),
            "project_id": [f"00000000-0000-0000-0000-00000000000{i}" for i in range(1, len(names) + 1)],
            "tenant_id": "10000000-0000-0000-0000-000000000000",
            "name": list(names),
        }
    )


def _objects(rows: list[tuple[int, str, str | None]], *, big: bool = False) -> pd.DataFrame:
    """rows: (project number, status, price text); free prices encoded as the read delivers them."""
    units, scales = [], []
    for _, status, price in rows:
        if status == "Free" and price is not None:
            u, s = price_units(price)
            units.append(u)
            scales.append(s)
        else:
            units.append(None)
            scales.append(None)
    return pd.DataFrame(
        {
            "n": pd.array([r[0] for r in rows], dtype="int64"),
            "status": pd.Categorical([r[1] for r in rows]),
            "price_units": pd.array(units, dtype="object" if big else "Int64"),
            "price_scale": pd.array(scales, dtype="Int16"),
        }
    )


def _layouts(rows: list[tuple[int, int]]) -> pd.DataFrame:
    return pd.DataFrame({"n": pd.array([r[0] for r in rows], dtype="int64"), "rooms": [r[1] for r in rows]})


OBJECTS = [
    (1, "Free", "5000000"),
    (1, "Free", "4500000.50"),
    (1, "Free", "7000000"),
    (1, "Free", None),  # free without a price: counted, no price bound
    (1, "Sold", "9000000"),
    (1, "Hidden", "1000"),
    (1, "Reserved", None),
    (1, "Booked", "3000000"),
    (3, "Free", "987654321098.76543"),
    (3, "Free", "987654321098.76544"),
    (3, "Sold", "1"),
]


def _frame(objects: pd.DataFrame) -> pd.DataFrame:
    return project_inventory(
        _projects("Alpha", "Empty", "Tower"),
        objects,
        _layouts([(1, 1), (1, 1), (1, 2), (3, 0)]),
        day=DAY,
        computed_at=AT,
    ).set_index(NAME_COLUMN)


def test_one_row_per_project_with_counts_by_status():
    frame = _frame(_objects(OBJECTS))
    assert list(frame.columns) == list(TABLE_COLUMNS)
    alpha = frame.loc["Alpha"]
    assert (alpha.free_count, alpha.total_count) == (4, 7)  # 8 live objects, one Hidden
    assert (alpha.sold_count, alpha.reserved_count, alpha.booked_count, alpha.hidden_count) == (1, 1, 1, 1)
    assert alpha.day == DAY and alpha.computed_at == AT
    assert alpha.tenant_id == "10000000-0000-0000-0000-000000000000"


def test_free_prices_are_exact():
    frame = _frame(_objects(OBJECTS))
    alpha, tower = frame.loc["Alpha"], frame.loc["Tower"]
    assert (alpha.price_min, alpha.price_max) == (Decimal("4500000.50"), Decimal("7000000"))
    assert alpha.price_median == Decimal("5000000")  # odd count: the middle price
    assert alpha.free_value == Decimal("16500000.50")
    # beyond a binary float's digits, an even count: the exact half of the two middle prices
    assert str(tower.price_min) == "987654321098.76543"
    assert str(tower.price_max) == "987654321098.76544"
    assert tower.price_median == Decimal("987654321098.765435")
    assert tower.free_value == Decimal("1975308642197.53087")


def test_a_project_without_objects_has_zero_counts_and_no_prices():
    empty = _frame(_objects(OBJECTS)).loc["Empty"]
    assert (empty.free_count, empty.total_count, empty.sold_count, empty.hidden_count) == (0, 0, 0, 0)
    assert empty.price_min is None and empty.price_max is None and empty.price_median is None
    assert empty.free_value == Decimal(0)
    assert empty.layouts_by_rooms == "{}"


def test_layouts_by_rooms():
    frame = _frame(_objects(OBJECTS))
    assert json.loads(frame.loc["Alpha"].layouts_by_rooms) == {"1": 2, "2": 1}
    assert json.loads(frame.loc["Tower"].layouts_by_rooms) == {"0": 1}


def test_free_count_and_price_bounds_are_the_project_aggregates():
    frame = _frame(_objects(OBJECTS))
    for n, name in ((1, "Alpha"), (2, "Empty"), (3, "Tower")):
        rows = [
            {"status": s, "price": None if p is None else Decimal(p), "deleted_at": None}
            for m, s, p in OBJECTS
            if m == n
        ]
        expected = project_aggregates(rows)
        row = frame.loc[name]
        assert row.free_count == expected.property_objects_free_count
        assert row.total_count == expected.property_objects_total_count
        assert (row.price_min, row.price_max) == (expected.price_min, expected.price_max)


def test_prices_beyond_int64_take_the_exact_slow_path():
    rows = [(1, "Free", "123456789012345678901.5"), (1, "Free", "2.25"), (1, "Free", "3")]
    frame = project_inventory(
        _projects("Huge"), _objects(rows, big=True), _layouts([]), day=DAY, computed_at=AT
    )
    row = frame.iloc[0]
    assert (row.price_min, row.price_max) == (Decimal("2.25"), Decimal("123456789012345678901.5"))
    assert row.price_median == Decimal("3")
    assert row.free_value == Decimal("123456789012345678906.75")


def test_day_totals_and_preview():
    objects = _objects(OBJECTS)
    prices = free_prices(objects)
    frame = project_inventory(
        _projects("Alpha", "Empty", "Tower"), objects, _layouts([]), day=DAY, computed_at=AT, prices=prices
    )
    totals = day_totals(frame, prices)
    assert (totals.projects, totals.free_objects, totals.total_objects) == (3, 6, 10)
    assert totals.free_value == Decimal("16500000.50") + Decimal("1975308642197.53087")
    # every free price of the day: 4500000.50, 5000000, 7000000 and the two Tower prices
    assert totals.median_free_price == Decimal("7000000")
    markdown = top_projects_markdown(frame, limit=2)
    lines = markdown.splitlines()
    assert lines[0].startswith("| project | free |") and len(lines) == 4
    assert lines[2].startswith("| Tower | 2 | 987,654,321,098.77")
    assert lines[3].startswith("| Alpha | 4 | 4,500,000.50 | 5,000,000.00 | 7,000,000.00 | 16,500,000.50 |")


def test_no_free_prices_at_all():
    prices = free_prices(_objects([(1, "Sold", "5"), (1, "Free", None)]))
    assert prices.median is None and prices.total == 0 and prices.count == 0


prices_st = st.decimals(min_value=0, max_value=10**12, places=2, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 3),
            st.sampled_from(["Free", "Free", "Sold", "Reserved", "Booked", "Hidden"]),
            st.none() | prices_st,
        ),
        max_size=40,
    )
)
def test_matches_a_python_reference(rows):
    objects = _objects([(n, s, None if p is None else str(p)) for n, s, p in rows])
    frame = project_inventory(
        _projects("A", "B", "C"), objects, _layouts([]), day=DAY, computed_at=AT
    ).set_index("project_id")
    for n in (1, 2, 3):
        row = frame.iloc[n - 1]
        free = sorted(p for m, s, p in rows if m == n and s == "Free" and p is not None)
        assert row.free_count == sum(1 for m, s, _ in rows if m == n and s == "Free")
        assert row.total_count == sum(1 for m, s, _ in rows if m == n and s != "Hidden")
        assert row.price_min == (free[0] if free else None)
        assert row.price_max == (free[-1] if free else None)
        assert row.price_median == (statistics.median(free) if free else None)
        assert row.free_value == sum(free, Decimal(0))


def test_an_empty_replica_gives_an_empty_day():
    frame = project_inventory(
        _projects(), _objects([]), _layouts([]), day=DAY, computed_at=AT, prices=free_prices(_objects([]))
    )
    assert frame.empty and list(frame.columns) == [*TABLE_COLUMNS, NAME_COLUMN]
    totals = day_totals(frame, free_prices(_objects([])))
    assert (totals.projects, totals.free_objects, totals.free_value, totals.median_free_price) == (
        0,
        0,
        0,
        None,
    )
    assert "(no live project)" in top_projects_markdown(frame)


def test_projects_without_any_object_in_the_day():
    frame = project_inventory(_projects("A", "B"), _objects([]), _layouts([(2, 3)]), day=DAY, computed_at=AT)
    assert frame["free_count"].tolist() == [0, 0] and frame["total_count"].tolist() == [0, 0]
    assert frame["layouts_by_rooms"].tolist() == ["{}", '{"3": 1}']


def test_a_day_is_computed_while_it_lasts_then_kept_from_what_was_recorded_on_it():
    midnight = datetime(2026, 12, 1, tzinfo=UTC)
    assert day_source(DAY, AT, None) is DaySource.REPLICA
    assert day_source(DAY, midnight + timedelta(minutes=59), None) is DaySource.REPLICA  # a late tick
    # a finished day is never rewritten from the replica: within the hour after it, its rows stay
    assert day_source(DAY, midnight + timedelta(minutes=30), AT) is DaySource.HISTORY
    late_tick = midnight + timedelta(minutes=5)  # the rows a late tick recorded are the day's record
    assert day_source(DAY, midnight + timedelta(minutes=40), late_tick) is DaySource.HISTORY
    assert day_source(DAY, AT, AT) is DaySource.REPLICA  # today: computed again
    later = midnight + timedelta(days=3)
    assert day_source(DAY, later, AT) is DaySource.HISTORY  # recorded on its day
    with pytest.raises(PastDayRefused, match="no rows were recorded on that day$|until 2026-12-01 01:00 UTC"):
        day_source(DAY, later, None)
    with pytest.raises(PastDayRefused, match="computed 2026-12-02 10:00 UTC, after it"):
        day_source(DAY, later, datetime(2026, 12, 2, 10, tzinfo=UTC))  # rows a backfill wrote later

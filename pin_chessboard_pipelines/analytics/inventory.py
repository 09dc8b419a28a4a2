"""The daily inventory of each project (docs/store.md#analytics) as pandas frames.

Pure: frames of replica rows in, one row per project out; no database. The definitions are the
aggregates' (docs/project-aggregates-recalc.md#aggregates): free = live and `Free`, total = live and not
`Hidden`. Prices stay exact: they arrive as integers with their scale, are ordered and summed as integers
of the day's largest scale, and leave as decimals, never through a binary float.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, localcontext
from enum import StrEnum

import numpy as np
import pandas as pd

from pin_chessboard_pipelines.errors import PastDayRefused

FREE, RESERVED, BOOKED, SOLD, HIDDEN = "Free", "Reserved", "Booked", "Sold", "Hidden"
STATUSES = (FREE, RESERVED, BOOKED, SOLD, HIDDEN)

# Input frames (analytics/store.py reads them in one query): `n` is the project's number in the read.
PROJECT_COLUMNS = ("n", "project_id", "tenant_id", "name")
# live property objects; a free object's price as units * 10^-scale (NULL: not free, or no price)
OBJECT_COLUMNS = ("n", "status", "price_units", "price_scale")
LAYOUT_COLUMNS = ("n", "rooms")  # live layouts

# chessboard_analytics.project_inventory_daily, in table order.
TABLE_COLUMNS = (
    "project_id",
    "day",
    "tenant_id",
    "free_count",
    "total_count",
    "sold_count",
    "reserved_count",
    "booked_count",
    "hidden_count",
    "price_min",
    "price_max",
    "price_median",
    "free_value",
    "layouts_by_rooms",
    "computed_at",
)
NAME_COLUMN = "project_name"  # for the preview only, not stored

_INT64_DIGITS = 18  # 10^19 is beyond int64: a larger scale never fits


@dataclass(frozen=True)
class FreePrices:
    """Exact statistics of free objects' prices, per project number and over the whole day."""

    per_project: pd.DataFrame  # index n; price_min, price_max, price_median, free_value (Decimal)
    median: Decimal | None  # over every free price of the day
    total: Decimal  # sum of every free price of the day
    count: int


@dataclass(frozen=True)
class DayTotals:
    """What an analyst plots over days."""

    projects: int
    free_objects: int
    total_objects: int
    free_value: Decimal
    median_free_price: Decimal | None


def project_inventory(
    projects: pd.DataFrame,
    objects: pd.DataFrame,
    layouts: pd.DataFrame,
    *,
    day: date,
    computed_at: datetime,
    prices: FreePrices | None = None,
) -> pd.DataFrame:
    """One row per project of `projects` (TABLE_COLUMNS + NAME_COLUMN), projects without objects
    included: counts 0, prices NULL, free_value 0."""
    index = pd.Index(projects["n"].to_numpy(), name="n")
    counts = (
        objects.groupby(["n", "status"], observed=True)
        .size()
        .unstack("status", fill_value=0)
        .reindex(index=index, fill_value=0)
    )
    all_statuses = counts.sum(axis=1) if len(counts.columns) else pd.Series(0, index=index)
    by_status = counts.reindex(columns=list(STATUSES), fill_value=0)
    prices = prices if prices is not None else free_prices(objects)
    stats = prices.per_project.reindex(index)
    frame = pd.DataFrame(
        {
            "project_id": projects["project_id"].to_numpy(),
            "day": day,
            "tenant_id": projects["tenant_id"].to_numpy(),
            "free_count": by_status[FREE].to_numpy(dtype="int64"),
            "total_count": (all_statuses - by_status[HIDDEN]).to_numpy(dtype="int64"),
            "sold_count": by_status[SOLD].to_numpy(dtype="int64"),
            "reserved_count": by_status[RESERVED].to_numpy(dtype="int64"),
            "booked_count": by_status[BOOKED].to_numpy(dtype="int64"),
            "hidden_count": by_status[HIDDEN].to_numpy(dtype="int64"),
            "price_min": _nullable(stats["price_min"]),
            "price_max": _nullable(stats["price_max"]),
            "price_median": _nullable(stats["price_median"]),
            "free_value": [Decimal(0) if v is None else v for v in _nullable(stats["free_value"])],
            "layouts_by_rooms": layouts_by_rooms(layouts).reindex(index, fill_value="{}").to_numpy(),
            "computed_at": computed_at,
            NAME_COLUMN: projects["name"].to_numpy(),
        }
    )
    return frame


def _nullable(column: pd.Series) -> list[Decimal | None]:
    return [None if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)) else v for v in column]


def layouts_by_rooms(layouts: pd.DataFrame) -> pd.Series:
    """JSON text per project number: live layouts counted by rooms, `{"0": 2, "1": 5}`."""
    sizes = layouts.groupby(["n", "rooms"]).size().reset_index(name="layouts")
    pairs = ('"' + sizes["rooms"].astype("int64").astype(str) + '": ' + sizes["layouts"].astype(str)).tolist()
    groups, starts = np.unique(sizes["n"].to_numpy(dtype="int64"), return_index=True)
    ends = [*starts[1:].tolist(), len(pairs)] if pairs else []
    texts = ["{" + ", ".join(pairs[a:b]) + "}" for a, b in zip(starts.tolist(), ends, strict=True)]
    return pd.Series(texts, index=pd.Index(groups, name="n"), dtype=object)


def price_units(price: Decimal | str) -> tuple[int, int]:
    """A price as (units, scale) with price = units * 10^-scale: how the read delivers free prices
    (analytics.sql, `inventory_rows`)."""
    value = Decimal(price)
    scale = max(0, -int(value.as_tuple().exponent))
    return int(value.scaleb(scale)), scale


def free_prices(objects: pd.DataFrame) -> FreePrices:
    """Exact min / max / median / sum of the free objects' prices (objects without a price skipped).

    `objects.price_units` / `price_scale` hold each free price as an integer and its scale; they are
    brought to the day's largest scale and handled as int64, or as Python decimals when they do not fit.
    """
    free = objects[(objects["status"] == FREE) & objects["price_units"].notna()]
    n = free["n"].to_numpy(dtype="int64")
    if len(n) == 0:
        return FreePrices(_per_project([], [], [], [], []), None, Decimal(0), 0)
    scales = free["price_scale"].to_numpy(dtype="int64")
    scale = int(scales.max())
    values = _int64_units(free["price_units"], scales, scale)
    if values is None:  # digits beyond int64: the slow, exact path
        units = [Decimal(int(u)).scaleb(-int(s)) for u, s in zip(free["price_units"], scales, strict=True)]
        return _decimal_prices(n, units)
    order = np.lexsort((values, n))
    n, values = n[order], values[order]
    groups, starts, sizes = np.unique(n, return_index=True, return_counts=True)
    lo, hi = starts + (sizes - 1) // 2, starts + sizes // 2
    if int(np.abs(values).max()) * int(sizes.max()) < 2**63:
        sums = np.add.reduceat(values, starts)
    else:
        sums = np.add.reduceat(values.astype(object), starts)
    middle = len(values) // 2
    overall = np.partition(values, [(len(values) - 1) // 2, middle])
    return FreePrices(
        per_project=_per_project(
            groups,
            [_unscaled(int(v), scale) for v in values[starts]],
            [_unscaled(int(v), scale) for v in values[starts + sizes - 1]],
            [_median_scaled(int(a), int(b), scale) for a, b in zip(values[lo], values[hi], strict=True)],
            [_unscaled(int(s), scale) for s in sums],
        ),
        median=_median_scaled(int(overall[(len(values) - 1) // 2]), int(overall[middle]), scale),
        total=_unscaled(sum(int(s) for s in sums), scale),
        count=len(values),
    )


def _int64_units(units: pd.Series, scales: np.ndarray, scale: int) -> np.ndarray | None:
    """Every price in units of 10^-scale as int64, or None when one does not fit."""
    if not pd.api.types.is_integer_dtype(units.dtype) or scale > _INT64_DIGITS:
        return None
    raw = units.to_numpy(dtype="int64")
    factors = 10 ** (scale - scales)
    if np.any(np.abs(raw) > (2**63 - 1) // factors):
        return None
    return raw * factors


def _per_project(groups, mins, maxs, medians, sums) -> pd.DataFrame:
    return pd.DataFrame(
        {"price_min": mins, "price_max": maxs, "price_median": medians, "free_value": sums},
        index=pd.Index(np.asarray(groups, dtype="int64"), name="n"),
        dtype=object,
    )


def _unscaled(value: int, scale: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 200  # a sum may have more digits than the default 28
        return Decimal(value).scaleb(-scale)


def _median_scaled(a: int, b: int, scale: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 200
        return (Decimal(a + b) / 2).scaleb(-scale)


def _decimal_prices(n: np.ndarray, prices: list[Decimal]) -> FreePrices:
    rows = sorted(zip(n.tolist(), prices, strict=True))
    groups: list[int] = []
    mins, maxs, medians, sums = [], [], [], []
    start = 0
    with localcontext() as ctx:
        ctx.prec = 200  # exact sums and halves of stored prices
        while start < len(rows):
            end = start
            while end < len(rows) and rows[end][0] == rows[start][0]:
                end += 1
            values = [v for _, v in rows[start:end]]
            groups.append(rows[start][0])
            mins.append(values[0])
            maxs.append(values[-1])
            medians.append((values[(len(values) - 1) // 2] + values[len(values) // 2]) / 2)
            sums.append(sum(values, Decimal(0)))
            start = end
        everything = sorted(v for _, v in rows)
        median = (everything[(len(everything) - 1) // 2] + everything[len(everything) // 2]) / 2
        total = sum(everything, Decimal(0))
    return FreePrices(_per_project(groups, mins, maxs, medians, sums), median, total, len(everything))


def day_totals(frame: pd.DataFrame, prices: FreePrices) -> DayTotals:
    return DayTotals(
        projects=len(frame),
        free_objects=int(frame["free_count"].sum()),
        total_objects=int(frame["total_count"].sum()),
        free_value=prices.total,
        median_free_price=prices.median,
    )


def top_projects_markdown(frame: pd.DataFrame, limit: int = 10) -> str:
    """The projects with the most free inventory (by value, then count), as a markdown table."""
    header = "| project | free | price min | price median | price max | free value |\n|---|---:|---:|---:|---:|---:|"
    if frame.empty:
        return header + "\n| (no live project) | | | | | |"
    ranked = frame.assign(_value=frame["free_value"].map(float)).sort_values(
        ["_value", "free_count", NAME_COLUMN], ascending=[False, False, True], kind="stable"
    )
    lines = [header]
    for row in ranked.head(limit).itertuples(index=False):
        lines.append(
            f"| {_cell(getattr(row, NAME_COLUMN))} | {row.free_count} | {_money(row.price_min)} | "
            f"{_money(row.price_median)} | {_money(row.price_max)} | {_money(row.free_value)} |"
        )
    return "\n".join(lines)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|")


def _money(value: Decimal | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


# -- which state a day's partition is made of (docs/store.md#analytics) -------------------------

# A day is computed from the replica while it lasts (UTC). Once it has ended it is never computed
# from the replica again: the replica then holds the next day's state, and the rows recorded on the
# day are its record, kept as they are. Only a day with no rows at all is still read from the
# replica this long after its end: a schedule tick at 23:50 that runs late records its day once.
LIVE_GRACE = timedelta(hours=1)


class DaySource(StrEnum):
    REPLICA = "replica"  # the replica now: the day is today (or a late tick's first rows of it)
    HISTORY = "history"  # the rows recorded on that day, kept as they are


def day_end(day: date) -> datetime:
    """When `day` ends (UTC): from then on the replica's state is no longer its own."""
    return datetime.combine(day + timedelta(days=1), time.min, tzinfo=UTC)


def live_until(day: date) -> datetime:
    """Until when a day with no rows recorded may still be read from the replica (a late tick)."""
    return day_end(day) + LIVE_GRACE


def day_source(day: date, now: datetime, recorded_at: datetime | None) -> DaySource:
    """Where `day`'s partition comes from at `now`: the replica while the day lasts; once it has
    ended, the rows recorded on it (`recorded_at`: their computed_at; None: none), never the
    replica again, except for a day with no rows at all within LIVE_GRACE of its end (a late
    tick records it once); raises PastDayRefused."""
    if now < day_end(day):
        return DaySource.REPLICA
    ends = live_until(day)
    if recorded_at is not None and recorded_at < ends:
        return DaySource.HISTORY
    if recorded_at is None and now < ends:
        return DaySource.REPLICA
    later = (
        ""
        if recorded_at is None
        else f" (its stored rows were computed {recorded_at:%Y-%m-%d %H:%M} UTC, after it)"
    )
    raise PastDayRefused(
        f"project_inventory_daily {day}: a past day is not computed from the replica, which holds "
        f"only the current state, and no rows were recorded on that day{later}; a day is computed "
        f"while it lasts (one with no rows until {ends:%Y-%m-%d %H:%M} UTC), later only the rows "
        f"recorded on it are kept"
    )


def recorded_totals(frame: pd.DataFrame) -> DayTotals:
    """The totals of a day's recorded rows (TABLE_COLUMNS); the day's median over every free price
    is not in them (None)."""
    return DayTotals(
        projects=len(frame),
        free_objects=int(sum(frame["free_count"])),
        total_objects=int(sum(frame["total_count"])),
        free_value=sum((Decimal(v) for v in frame["free_value"]), Decimal(0)),
        median_free_price=None,
    )


def recorded_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """Recorded rows as they are written again (layouts_by_rooms as JSON text, like a computed day's)."""
    return frame.assign(
        layouts_by_rooms=[
            v if isinstance(v, str) else json.dumps(v, sort_keys=True) for v in frame["layouts_by_rooms"]
        ]
    )

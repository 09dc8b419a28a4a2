"""What the scale benchmark (scale_bench.py) plans before it starts, as functions of values: the
dataset of a size, the disk and time a size needs, the one line that refuses a run the disk
cannot hold, and the CPU per object of each size relative to the smallest."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

OBJECTS_PER_PROJECT = 100
PROJECTS_PER_DEVELOPER = 100

# From runs of 20k and 100k objects (PostgreSQL with the bulk-load settings), rounded up: the database
# at its peak (replica, outbox, pages, recalc rows, a COPY reference's copy) per object (7.5 kB and
# 7.1 kB measured), the largest COPY dump per object (2.0 kB), the wall time per object of a whole
# size, every fixed cost included (730 µs at 100k).
DATABASE_BYTES_PER_OBJECT = 8_000
DUMP_BYTES_PER_OBJECT = 2_500
SECONDS_PER_OBJECT = 0.0008
# PostgreSQL's WAL besides the database: max_wal_size (its default 1GB) is a soft limit, so half again
DEFAULT_MAX_WAL_SIZE = 1 << 30
WAL_HEADROOM = 1.5

_UNITS = {"": 1 << 20, "kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40}


@dataclass(frozen=True)
class Rates:
    """Bytes and seconds per object, measured at `measured_at` objects (None: the constants above)."""

    database_bytes: float = DATABASE_BYTES_PER_OBJECT
    dump_bytes: float = DUMP_BYTES_PER_OBJECT
    seconds: float = SECONDS_PER_OBJECT
    measured_at: int | None = None


@dataclass(frozen=True)
class Need:
    objects: int
    database_bytes: int  # on the PostgreSQL data directory's disk, WAL included
    dump_bytes: int  # on the temporary directory's disk (a COPY reference's dump)
    seconds: float


def parse_sizes(text: str) -> list[int]:
    """`100000,1000000` (or `1e5,1e6`): the sizes, each a positive whole number of objects."""
    sizes = []
    for part in filter(None, (p.strip().replace("_", "") for p in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"--objects: {part!r} is not a number of objects") from None
        if value < OBJECTS_PER_PROJECT or value != int(value):
            raise ValueError(f"--objects: {part!r} must be a whole number >= {OBJECTS_PER_PROJECT}")
        sizes.append(int(value))
    if not sizes:
        raise ValueError("--objects: no size given")
    return sizes


def dataset_for(objects: int) -> dict[str, int]:
    """The simulator's overrides of its "1m" preset for about `objects` property objects: 100 objects a
    project, 100 projects a developer (fewer projects when one developer is enough)."""
    projects = max(1, math.ceil(objects / OBJECTS_PER_PROJECT))
    developers = math.ceil(projects / PROJECTS_PER_DEVELOPER)
    return {
        "developers": developers,
        "projects_per_developer": math.ceil(projects / developers),
        "objects_per_project": OBJECTS_PER_PROJECT,
    }


def dataset_objects(dataset: Mapping[str, int]) -> int:
    return dataset["developers"] * dataset["projects_per_developer"] * dataset["objects_per_project"]


def parse_bytes(value: str) -> int:
    """A PostgreSQL memory or size setting (`8GB`, `512MB`, `1024` = MB, as max_wal_size's unit)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT][bB])?\s*", value)
    if not match:
        raise ValueError(f"{value!r} is not a size such as 8GB")
    return int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]


def max_wal_size(settings: list[str]) -> int:
    """max_wal_size in bytes among NAME=VALUE settings, PostgreSQL's default when not given."""
    for setting in reversed(settings):
        name, _, value = setting.partition("=")
        if name.strip() == "max_wal_size":
            return parse_bytes(value)
    return DEFAULT_MAX_WAL_SIZE


def need(objects: int, rates: Rates, wal_bytes: int) -> Need:
    return Need(
        objects=objects,
        database_bytes=math.ceil(objects * rates.database_bytes + WAL_HEADROOM * wal_bytes),
        dump_bytes=math.ceil(objects * rates.dump_bytes),
        seconds=objects * rates.seconds,
    )


def human_bytes(value: float) -> str:
    for unit, size in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("kB", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def human_seconds(value: float) -> str:
    if value >= 3600:
        return f"{value / 3600:.1f} h"
    if value >= 60:
        return f"{value / 60:.0f} min"
    return f"{value:.0f} s"


def need_line(n: Need, rates: Rates) -> str:
    source = f"measured at {rates.measured_at:,} objects" if rates.measured_at else "constants of small runs"
    return (
        f"{n.objects:>12,} objects: database {human_bytes(n.database_bytes)} (WAL included), "
        f"COPY dump {human_bytes(n.dump_bytes)}, about {human_seconds(n.seconds)} "
        f"({rates.database_bytes / 1024:.1f} kB and {rates.seconds * 1e6:.0f} µs per object, {source})"
    )


def refusal(
    n: Need,
    data_dir: str | None,
    tmp_dir: str,
    free: Mapping[str, int],
    device: Mapping[str, int],
) -> str | None:
    """The one line refusing size `n` when a disk cannot hold what it needs, else None.

    `data_dir`: the PostgreSQL data directory (None: a server elsewhere, whose disk is not ours to
    check); `free` and `device`: shutil.disk_usage(path).free and os.stat(path).st_dev of each
    directory. Two directories on one device add up their needs."""
    wanted: dict[int, int] = {}
    where: dict[int, list[str]] = {}
    for path, amount in ((data_dir, n.database_bytes), (tmp_dir, n.dump_bytes)):
        if path is None:
            continue
        wanted[device[path]] = wanted.get(device[path], 0) + amount
        where.setdefault(device[path], []).append(path)
    for dev, amount in wanted.items():
        paths = where[dev]
        if amount > free[paths[0]]:
            return (
                f"scale_bench: {n.objects:,} objects need {human_bytes(amount)} on "
                f"{' and '.join(dict.fromkeys(paths))}, which has {human_bytes(free[paths[0]])} free"
            )
    return None


def relative(values: list[float]) -> list[float]:
    """Each value over the first (the smallest size's); NaN where the first is 0 or unknown."""
    base = values[0] if values else float("nan")
    return [v / base if base and not math.isnan(base) else float("nan") for v in values]

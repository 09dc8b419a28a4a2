"""What a synthetic Talent dataset is made of (`DatasetSpec`, its presets and overrides) and the
faults its server answers with (`FaultRule`, `parse_faults`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.errors import DatasetError

Item = dict[str, Any]

FAULT_KINDS = ("503", "429", "malformed")
INDEX_BITS = 62  # an index fits the low half of an id, below the two bits of the UUID variant


@dataclass(frozen=True)
class FaultRule:
    """Answer page `page_no` (0-based, of a walk with one limit) of `collection` with `kind`, `times` times."""

    collection: str
    page_no: int
    kind: str  # "503" | "429" | "malformed"
    times: int = 1

    def __post_init__(self) -> None:
        if self.collection not in COLLECTIONS:
            raise DatasetError(f"fault collection {self.collection!r} is not one of {', '.join(COLLECTIONS)}")
        if self.kind not in FAULT_KINDS:
            raise DatasetError(f"fault kind {self.kind!r} is not one of {', '.join(FAULT_KINDS)}")
        if self.page_no < 0 or self.times < 1:
            raise DatasetError("fault page_no must be >= 0 and times >= 1")


@dataclass(frozen=True)
class DatasetSpec:
    """The knobs of the synthetic dataset; the defaults are the "tiny" preset.

    The *_every knobs mark every Nth item (index N-1, 2N-1, ...) of a collection; 0 = none.
    """

    seed: int = 1
    developers: int = 1
    projects_per_developer: int = 2
    buildings_per_project: int = 1
    layout_groups_per_project: int = 2
    layouts_per_project: int = 3
    objects_per_project: int = 10
    poison_every: int = 0  # property objects breaking a hard rule (see poison_kind)
    unknown_enum_every: int = 0  # projects and property objects with an enum value outside the list
    deleted_every: int = 0  # entities of every collection carrying deletedAt
    unknown_reference_every: int = 0  # projects with a regionId / cityId the handbook does not know
    version: int = 1  # generation: added to every entity's version (minus 1)
    # projects naming the next developer as their owner (a Talent that moves a project to another
    # developer, which the replica refuses: CHESSBOARD_SYNC_IMMUTABLE_CHANGED); the developerId
    # filter still lists them under their first developer
    owner_changed_every: int = 0
    developer_renames: int = 0  # each developer renamed this many times (its name's word moves on)
    latency_ms: int = 0  # server: sleep per request
    faults: tuple[FaultRule, ...] = ()  # server: injected failures

    def __post_init__(self) -> None:
        faults = tuple(f if isinstance(f, FaultRule) else FaultRule(*f) for f in self.faults)
        object.__setattr__(self, "faults", faults)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name != "faults" and (not isinstance(value, int) or isinstance(value, bool)):
                raise DatasetError(f"{f.name} must be an integer, got {value!r}")
            if f.name not in ("faults", "seed") and value < 0:
                raise DatasetError(f"{f.name} must be >= 0, got {value}")
        if self.version < 1:
            raise DatasetError(f"version must be >= 1, got {self.version}")
        if self.objects_per_project and not self.buildings_per_project:
            raise DatasetError("objects_per_project > 0 needs buildings_per_project >= 1")
        if self.developers * self.projects_per_developer * self.largest_per_project() >= 1 << INDEX_BITS:
            raise DatasetError("the dataset is too large for 62-bit indexes")

    def largest_per_project(self) -> int:
        return max(
            1,
            self.buildings_per_project,
            self.layout_groups_per_project,
            self.layouts_per_project,
            self.objects_per_project,
        )

    @staticmethod
    def preset(name: str) -> DatasetSpec:
        try:
            return PRESETS[name]
        except KeyError:
            raise DatasetError(
                f"unknown dataset preset {name!r}: expected one of {', '.join(PRESETS)}"
            ) from None

    def with_overrides(self, pairs: Iterable[str]) -> DatasetSpec:
        """Apply CLI-style `key=value` overrides (`poison_every=50`, `faults=projects:0:503:2,...`)."""
        changes: dict[str, Any] = {}
        names = {f.name for f in dataclasses.fields(self)}
        for pair in pairs:
            key, sep, raw = pair.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or not key:
                raise DatasetError(f"--set {pair!r}: expected key=value")
            if key not in names:
                raise DatasetError(
                    f"--set {pair!r}: unknown key {key!r}, expected one of {', '.join(sorted(names))}"
                )
            if key == "faults":
                changes[key] = parse_faults(raw)
                continue
            try:
                changes[key] = int(raw.strip())
            except ValueError:
                raise DatasetError(f"--set {pair!r}: {key} expects an integer") from None
        return dataclasses.replace(self, **changes)


def parse_faults(text: str) -> tuple[FaultRule, ...]:
    """`collection:page_no:kind[:times]`, comma separated; an empty string = no faults."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        fields = part.split(":")
        if len(fields) not in (3, 4):
            raise DatasetError(f"fault {part!r}: expected collection:page_no:kind[:times]")
        try:
            page_no, times = int(fields[1]), int(fields[3]) if len(fields) == 4 else 1
        except ValueError:
            raise DatasetError(f"fault {part!r}: page_no and times must be integers") from None
        rules.append(FaultRule(fields[0], page_no, fields[2], times))
    return tuple(rules)


# the sizes of a preset: developers, projects per developer, then per project its buildings, layout
# groups, layouts and property objects
_SIZES = (
    "developers",
    "projects_per_developer",
    "buildings_per_project",
    "layout_groups_per_project",
    "layouts_per_project",
    "objects_per_project",
)


def _sized(*sizes: int) -> DatasetSpec:
    """A preset by its _SIZES, in that order."""
    knobs: dict[str, Any] = dict(zip(_SIZES, sizes, strict=True))
    return DatasetSpec(**knobs)


PRESETS: dict[str, DatasetSpec] = {
    "tiny": DatasetSpec(),
    "demo": _sized(3, 4, 3, 4, 8, 100),
    "1m": _sized(100, 100, 5, 4, 10, 100),
}

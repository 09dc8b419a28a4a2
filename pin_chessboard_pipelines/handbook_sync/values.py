"""The handbook topics' values as functions of bytes (docs/store.md#handbook-sync): decoding and
validation, the newest value per id, and which applied changes rename something. No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pin_chessboard_pipelines.store.handbook import CITIES_TOPIC, REGIONS_TOPIC
from pin_chessboard_pipelines.talent.topic_reader import Source

NAME_MAX = 128  # handbook_regions.name / handbook_cities.name
INT64_MAX = 2**63 - 1


class Kind(StrEnum):
    REGION = "region"
    CITY = "city"

    @property
    def topic(self) -> str:
        return REGIONS_TOPIC if self is Kind.REGION else CITIES_TOPIC

    @property
    def stage(self) -> str:
        """The stage of its quarantine rows (talent_import_failed_items.stage)."""
        return "HandbookRegions" if self is Kind.REGION else "HandbookCities"

    @property
    def column(self) -> str:
        """The projects' column that references it."""
        return "region_id" if self is Kind.REGION else "city_id"

    @property
    def snapshot(self) -> str:
        return "regionSnapshot" if self is Kind.REGION else "citySnapshot"


KIND_OF_TOPIC = {kind.topic: kind for kind in Kind}


@dataclass(frozen=True)
class HandbookValue:
    kind: Kind
    id: int
    name: str
    version: int
    region_id: int | None = None  # cities only


@dataclass(frozen=True)
class InvalidValue:
    kind: Kind
    key: str | None
    raw: Any
    message: str
    source: Source | None = None  # the message it was read from: quarantined once per message


@dataclass(frozen=True)
class Rename:
    kind: Kind
    id: int
    old_name: str
    new_name: str
    version: int


def decode(topic: str, key: bytes | None, value: bytes | None) -> HandbookValue | InvalidValue | None:
    """One message as a value; None for a tombstone (a compacted topic's delete: the replica keeps
    the row, projects keep resolving it); InvalidValue for what breaks the contract."""
    kind = KIND_OF_TOPIC[topic]
    key_text = None if key is None else key.decode("utf-8", "replace")
    if value is None:
        return None
    try:
        raw = json.loads(value)
    except ValueError:
        return InvalidValue(kind, key_text, value[:512].decode("utf-8", "replace"), "the value is not JSON")
    return parse(kind, key_text, raw)


def parse(kind: Kind, key: str | None, raw: Any) -> HandbookValue | InvalidValue:
    def invalid(message: str) -> InvalidValue:
        return InvalidValue(kind, key, raw, f"{kind.topic}: {message}")

    if not isinstance(raw, Mapping):
        return invalid("the value is not a JSON object")
    ident: Any = raw.get("id")
    name: Any = raw.get("name")
    version: Any = raw.get("version")
    if not _is_int(ident) or not 0 < ident <= INT64_MAX:
        return invalid(f"id: {ident!r} is not a positive int64")
    if key is not None and key.strip() != str(ident):
        return invalid(f"id {ident} differs from the key {key!r}")
    if not isinstance(name, str) or not name.strip():
        return invalid(f"name: {name!r} is not a non-empty string")
    if len(name) > NAME_MAX:
        return invalid(f"name: {len(name)} characters, at most {NAME_MAX}")
    if not _is_int(version) or not 1 <= version <= INT64_MAX:
        return invalid(f"version: {version!r} is not an int64 >= 1")
    region_id: Any = None
    if kind is Kind.CITY:
        region_id = raw.get("regionId")
        if not _is_int(region_id) or not 0 < region_id <= INT64_MAX:
            return invalid(f"regionId: {region_id!r} is not a positive int64")
    return HandbookValue(kind, ident, name, version, region_id)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def newest(values: Iterable[HandbookValue]) -> list[HandbookValue]:
    """The value with the greatest version per (kind, id), in id order: what the batch leaves."""
    best: dict[tuple[Kind, int], HandbookValue] = {}
    for v in values:
        held = best.get((v.kind, v.id))
        if held is None or v.version > held.version:
            best[(v.kind, v.id)] = v
    return [best[k] for k in sorted(best)]


def renames(kind: Kind, applied: Sequence[Mapping[str, Any]]) -> list[Rename]:
    """The applied rows (upsert_regions / upsert_cities) whose display name changed; a created row
    renames nothing (no project resolved its id), nor does a new version with the same name."""
    return [
        Rename(kind, int(row["id"]), row["old_name"], row["name"], int(row["version"]))
        for row in applied
        if not row["inserted"] and row["old_name"] is not None and row["old_name"] != row["name"]
    ]

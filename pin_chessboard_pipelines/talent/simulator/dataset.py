"""A deterministic synthetic Talent dataset, computed lazily by index arithmetic: its listings
(pages by cursor, by-ids lookups, every item of a filter), and in one import the spec
(simulator/spec.py), the ids and ranges (simulator/indexes.py) and the knobs (simulator/items.py)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from typing import Any

from pin_chessboard_pipelines.errors import InvalidQuery
from pin_chessboard_pipelines.talent.simulator.indexes import (
    check_collection,
    count,
    decode_id,
    describe,
    entity_id,
    index_of,
    index_range,
)
from pin_chessboard_pipelines.talent.simulator.items import (
    BUILDERS,
    poison_kind,
    project_owner,
    unknown_enum_field,
)
from pin_chessboard_pipelines.talent.simulator.spec import DatasetSpec, FaultRule, parse_faults

Item = dict[str, Any]


def encode_cursor(collection: str, index: int) -> str:
    return base64.urlsafe_b64encode(f"{collection}:{index}".encode()).decode().rstrip("=")


def _decode_cursor(collection: str, cursor: str, span: range) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        cursor_collection, _, index_text = raw.rpartition(":")
        index = int(index_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidQuery("cursor is not a cursor of this API") from None
    if cursor_collection != collection or not span.start <= index <= span.stop:
        raise InvalidQuery("cursor does not belong to this listing")
    return index


def page_start(
    spec: DatasetSpec,
    collection: str,
    cursor: str | None,
    developer_id: str | None = None,
    project_id: str | None = None,
) -> tuple[range, int]:
    """(the listing's index range, the index the page at `cursor` starts at)."""
    span = index_range(spec, collection, developer_id, project_id)
    return span, span.start if not cursor else _decode_cursor(collection, cursor, span)


def page_number(
    spec: DatasetSpec,
    collection: str,
    cursor: str | None,
    limit: int,
    developer_id: str | None = None,
    project_id: str | None = None,
) -> int:
    """0-based number of the page at `cursor` in a walk with this limit (the key of fault rules)."""
    span, start = page_start(spec, collection, cursor, developer_id, project_id)
    return (start - span.start) // limit


def list_page(
    spec: DatasetSpec,
    collection: str,
    cursor: str | None,
    limit: int,
    developer_id: str | None = None,
    project_id: str | None = None,
) -> tuple[list[Item], str | None]:
    """One page of a listing: (items, nextCursor); nextCursor None = last page."""
    if limit < 1:
        raise InvalidQuery("limit must be >= 1")
    span, start = page_start(spec, collection, cursor, developer_id, project_id)
    stop = min(span.stop, start + limit)
    build = BUILDERS[collection]
    items = [build(spec, i) for i in range(start, stop)]
    return items, (encode_cursor(collection, stop) if stop < span.stop else None)


def by_ids(spec: DatasetSpec, ids: Iterable[str], collection: str = "property-objects") -> list[Item]:
    """The items of `collection` among `ids`, in the order asked, each once; unknown ids are left out."""
    check_collection(collection)
    seen: set[int] = set()
    items = []
    build = BUILDERS[collection]
    for talent_id in ids:
        index = index_of(spec, collection, talent_id)
        if index is not None and index not in seen:
            seen.add(index)
            items.append(build(spec, index))
    return items


def item(spec: DatasetSpec, collection: str, index: int) -> Item:
    check_collection(collection)
    if not 0 <= index < count(spec, collection):
        raise IndexError(f"{collection}[{index}] is out of range")
    return BUILDERS[collection](spec, index)


def iter_items(
    spec: DatasetSpec, collection: str, developer_id: str | None = None, project_id: str | None = None
) -> Iterator[Item]:
    """Every item of a listing, one at a time (flat memory)."""
    build = BUILDERS[collection]
    for i in index_range(spec, collection, developer_id, project_id):
        yield build(spec, i)


__all__ = [
    "DatasetSpec",
    "FaultRule",
    "by_ids",
    "count",
    "decode_id",
    "describe",
    "encode_cursor",
    "entity_id",
    "index_of",
    "index_range",
    "item",
    "iter_items",
    "list_page",
    "page_number",
    "page_start",
    "parse_faults",
    "poison_kind",
    "project_owner",
    "unknown_enum_field",
]

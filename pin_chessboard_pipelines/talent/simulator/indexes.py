"""Ids and index ranges of the synthetic dataset: every snapshot is a pure function of (spec,
collection, index), and ids are UUIDs that encode the collection and the index (see `entity_id`),
which turns `by-ids` lookups and the developerId / projectId filters into O(1) arithmetic.

Ownership (P = projects_per_developer, n = per-project count of a collection):
developer d owns projects [d*P, (d+1)*P); project p owns items [p*n, (p+1)*n) of buildings,
layout-groups, layouts and property-objects. A filter is therefore always one contiguous index
range, and every listing is ordered by index.
"""

from __future__ import annotations

import functools
import hashlib
import uuid

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.errors import InvalidQuery, UnknownCollection
from pin_chessboard_pipelines.talent.simulator.spec import INDEX_BITS, DatasetSpec

_M64 = (1 << 64) - 1


@functools.lru_cache(maxsize=64)
def collection_prefixes(seed: int) -> dict[str, int]:
    """The high 64 bits of every id of a collection: a hash of (seed, collection), UUID version 8."""
    out = {}
    for collection in COLLECTIONS:
        digest = hashlib.blake2b(f"{seed}:{collection}".encode(), digest_size=8).digest()
        out[collection] = (int.from_bytes(digest, "big") & ~0xF000) | 0x8000
    return out


@functools.lru_cache(maxsize=64)
def _collections_by_prefix(seed: int) -> dict[int, str]:
    return {prefix: collection for collection, prefix in collection_prefixes(seed).items()}


def entity_id(spec: DatasetSpec, collection: str, index: int) -> str:
    """The id of item `index` of `collection`: high half = collection hash, low half = variant | index."""
    h = f"{(collection_prefixes(spec.seed)[collection] << 64) | (1 << 63) | index:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def decode_id(spec: DatasetSpec, talent_id: str) -> tuple[str, int] | None:
    """(collection, index) of an id of this dataset, or None for anything else (including out of range)."""
    try:
        value = uuid.UUID(talent_id).int
    except (ValueError, TypeError, AttributeError):
        return None
    collection = _collections_by_prefix(spec.seed).get(value >> 64)
    low = value & _M64
    if collection is None or low >> INDEX_BITS != 0b10:
        return None
    index = low & ((1 << INDEX_BITS) - 1)
    return (collection, index) if index < count(spec, collection) else None


def index_of(spec: DatasetSpec, collection: str, talent_id: str) -> int | None:
    decoded = decode_id(spec, talent_id)
    return decoded[1] if decoded is not None and decoded[0] == collection else None


def _per_project(spec: DatasetSpec, collection: str) -> int:
    if collection == "projects":
        return 1
    if collection == "buildings":
        return spec.buildings_per_project
    if collection == "layout-groups":
        return spec.layout_groups_per_project
    if collection == "layouts":
        return spec.layouts_per_project
    if collection == "property-objects":
        return spec.objects_per_project
    raise UnknownCollection(f"unknown collection {collection!r}")


def check_collection(collection: str) -> None:
    if collection not in COLLECTIONS:
        raise UnknownCollection(f"unknown collection {collection!r}")


def index_range(
    spec: DatasetSpec, collection: str, developer_id: str | None = None, project_id: str | None = None
) -> range:
    """The contiguous indexes of `collection` a listing with these filters walks."""
    check_collection(collection)
    if developer_id and project_id:
        raise InvalidQuery("developerId and projectId are mutually exclusive")
    per_developer = spec.projects_per_developer
    if collection == "developers":
        if developer_id:
            d = index_of(spec, "developers", developer_id)
        elif project_id:
            p = index_of(spec, "projects", project_id)
            d = None if p is None else p // per_developer
        else:
            return range(spec.developers)
        return range(0) if d is None else range(d, d + 1)
    n = _per_project(spec, collection)
    if developer_id:
        d = index_of(spec, "developers", developer_id)
        return range(0) if d is None else range(d * per_developer * n, (d + 1) * per_developer * n)
    if project_id:
        p = index_of(spec, "projects", project_id)
        return range(0) if p is None else range(p * n, (p + 1) * n)
    return range(spec.developers * per_developer * n)


def count(
    spec: DatasetSpec, collection: str, developer_id: str | None = None, project_id: str | None = None
) -> int:
    return len(index_range(spec, collection, developer_id, project_id))


def describe(spec: DatasetSpec) -> str:
    """Each collection's size, `developers=2 projects=4 …`."""
    return " ".join(f"{c}={count(spec, c)}" for c in COLLECTIONS)

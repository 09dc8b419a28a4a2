"""The replica side of each entity: the columns its upsert takes and the columns its reads need.

Derived from the entity's declaration (entities.py) through its table (store/tables.py); the upsert
itself is store/replica_upserts.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Table

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.entities import Entity
from pin_chessboard_pipelines.store import replica_upserts
from pin_chessboard_pipelines.store.replica_upserts import Upsert, replica_upsert
from pin_chessboard_pipelines.store.tables import REPLICA_BY_ENTITY

EXISTING = ("id", "external_talent_id", "replica_version", "version", "deleted_at")
# What the rules of a property object read of its current row besides its parents: its live number
# and the old status / price of the change events (replica/rules.py).
RULE_COLUMNS: dict[str, tuple[str, ...]] = {
    entities.PROPERTY_OBJECT.name: ("number", "status", "status_source", "price"),
}


@dataclass(frozen=True)
class ReplicaEntity:
    entity: Entity
    table: Table = field(compare=False)

    @property
    def name(self) -> str:
        return self.entity.name

    @property
    def upsert(self) -> Upsert:
        return replica_upsert(self.table)

    @property
    def upsert_columns(self) -> tuple[str, ...]:
        """The array parameters of its upsert, in table order."""
        return replica_upserts.parameter_columns(self.table)

    @property
    def text_columns(self) -> frozenset[str]:
        """Upsert columns whose values are free text (quoted in array literals)."""
        return replica_upserts.text_columns(self.table)

    @property
    def existing_columns(self) -> tuple[str, ...]:
        """Read besides EXISTING: its project and tenant (the recalcs), its parents' ids and what
        its rules read."""
        e = self.entity
        wanted = (
            "project_id",
            "tenant_id",
            e.parent_column,
            e.extra_parent_column,
            *RULE_COLUMNS.get(e.name, ()),
        )
        return tuple(c for c in dict.fromkeys(wanted) if c is not None and c in self.table.c)


REPLICA: dict[str, ReplicaEntity] = {
    e.name: ReplicaEntity(e, REPLICA_BY_ENTITY[e.name]) for e in entities.ENTITIES
}


def replica_entity(name: str) -> ReplicaEntity:
    """The replica side of a Talent entity (docs/talent-source.md#snapshots); ValueError naming
    the six for any other."""
    return REPLICA[entities.entity(name).name]

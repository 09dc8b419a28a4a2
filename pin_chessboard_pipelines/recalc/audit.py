"""The drift check (docs/project-aggregates-recalc.md#audit): stored aggregates against count/min/max.

Used by `pin-chessboard recalc audit` and by the Dagster asset check on `chessboard_aggregates`.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.store.queries import queries


@dataclass(frozen=True)
class Divergence:
    entity: str  # project | building | layout | layout_group
    id: UUID
    project_id: UUID
    field: str
    stored: str | None
    expected: str | None
    pending: bool = False  # the project has a row in the recalc queue: a recalc is on its way

    def line(self) -> str:
        return (
            f"{'pending: ' if self.pending else ''}{self.entity} {self.id} (project {self.project_id}): "
            f"{self.field} stored={_shown(self.stored)} expected={_shown(self.expected)}"
        )

    def as_dict(self) -> dict[str, str | bool | None]:
        return {
            "entity": self.entity,
            "id": str(self.id),
            "projectId": str(self.project_id),
            "field": self.field,
            "stored": self.stored,
            "expected": self.expected,
            "pending": self.pending,
        }


def _shown(value: str | None) -> str:
    return "NULL" if value is None else value


def drift(divergences: list[Divergence]) -> list[Divergence]:
    """Divergences no queued recalc will fix: a project with a pending queue row is not drift."""
    return [d for d in divergences if not d.pending]


def audit(conn: Connection, project_id: UUID | None = None) -> list[Divergence]:
    """Every divergence of live projects (archived and deleted ones carry no aggregates), drift and
    pending alike (`drift()` keeps the former)."""
    rows = conn.execute(
        queries("recalc")["audit"], {"project_id": None if project_id is None else str(project_id)}
    ).mappings()
    return [
        Divergence(
            entity=row["entity"],
            id=_uuid(row["id"]),
            project_id=_uuid(row["project_id"]),
            field=row["field"],
            stored=row["stored"],
            expected=row["expected"],
            pending=bool(row["pending"]),
        )
        for row in rows
    ]


def _uuid(value: object) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))

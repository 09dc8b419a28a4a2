"""Store rows for the recalc tests, inserted directly with SQLAlchemy Core (multi-row statements).

Aggregate columns start as the replica leaves them (counters 0, bounds NULL) unless given.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.store.tables import (
    buildings,
    developers,
    layout_groups,
    layouts,
    project_recalc_requests,
    projects,
    property_objects,
)


def _now() -> datetime:
    return datetime.now(UTC)


def _replica(**extra: Any) -> dict[str, Any]:
    return {"id": uuid.uuid4(), "external_talent_id": uuid.uuid4(), "replica_version": 1, **extra}


@dataclass
class ProjectRows:
    """Ids of one project's hierarchy."""

    id: UUID
    tenant_id: UUID
    buildings: list[UUID] = field(default_factory=list)
    layout_groups: list[UUID] = field(default_factory=list)
    layouts: list[UUID] = field(default_factory=list)
    objects: list[UUID] = field(default_factory=list)


class StoreBuilder:
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._numbers = 0

    def developer(self) -> UUID:
        row = _replica(name="Developer")
        self.conn.execute(sa.insert(developers), [row])
        return row["id"]

    def project(self, developer_id: UUID | None = None, **values: Any) -> ProjectRows:
        developer_id = developer_id or self.developer()
        row = _replica(
            tenant_id=developer_id,
            developer_id=developer_id,
            name="Project",
            type="ResidentialComplex",
            **{"class": "Comfort"},
            construction_status="UnderConstruction",
            country_id=643,
            region_id=77,
            city_id=1,
            currency_id=643,
        )
        row.update(values)
        self.conn.execute(sa.insert(projects), [row])
        return ProjectRows(id=row["id"], tenant_id=developer_id)

    def buildings(self, project: ProjectRows, count: int = 1, **values: Any) -> list[UUID]:
        rows = [
            _replica(
                tenant_id=project.tenant_id, project_id=project.id, name=f"B{i}", floors_count=10, **values
            )
            for i in range(count)
        ]
        self.conn.execute(sa.insert(buildings), rows)
        project.buildings += [r["id"] for r in rows]
        return [r["id"] for r in rows]

    def layout_groups(self, project: ProjectRows, count: int = 1, **values: Any) -> list[UUID]:
        rows = [
            _replica(tenant_id=project.tenant_id, project_id=project.id, name=f"G{i}", rooms=i % 4, **values)
            for i in range(count)
        ]
        self.conn.execute(sa.insert(layout_groups), rows)
        project.layout_groups += [r["id"] for r in rows]
        return [r["id"] for r in rows]

    def layouts(
        self,
        project: ProjectRows,
        specs: Sequence[tuple[UUID | None, Decimal | str | int, bool]],
        **values: Any,
    ) -> list[UUID]:
        """specs: (layout_group_id, total_area, deleted)."""
        rows = [
            _replica(
                tenant_id=project.tenant_id,
                project_id=project.id,
                layout_group_id=group,
                name=f"L{i}",
                rooms=1,
                total_area=Decimal(str(area)),
                deleted_at=_now() if deleted else None,
                **values,
            )
            for i, (group, area, deleted) in enumerate(specs)
        ]
        if rows:
            self.conn.execute(sa.insert(layouts), rows)
        project.layouts += [r["id"] for r in rows]
        return [r["id"] for r in rows]

    def objects(
        self,
        project: ProjectRows,
        specs: Iterable[tuple[UUID, UUID | None, str, Decimal | str | int | None, bool]],
    ) -> list[UUID]:
        """specs: (building_id, layout_id, status, price, deleted)."""
        rows = []
        for building, layout, status, price, deleted in specs:
            self._numbers += 1
            rows.append(
                _replica(
                    tenant_id=project.tenant_id,
                    project_id=project.id,
                    building_id=building,
                    layout_id=layout,
                    number=str(self._numbers),
                    floor=1,
                    status=status,
                    price=None if price is None else Decimal(str(price)),
                    total_area=Decimal("42.5"),
                    deleted_at=_now() if deleted else None,
                )
            )
        if rows:
            self.conn.execute(sa.insert(property_objects), rows)
        project.objects += [r["id"] for r in rows]
        return [r["id"] for r in rows]

    def request(
        self,
        project: ProjectRows,
        *,
        due_in_seconds: float = 0,
        requested_count: int = 1,
        attempt_count: int = 0,
    ) -> None:
        """A queue row due `due_in_seconds` from now (0 = due now)."""
        self.conn.execute(
            sa.insert(project_recalc_requests).values(
                project_id=project.id,
                tenant_id=project.tenant_id,
                due_at=sa.func.now() + sa.func.make_interval(0, 0, 0, 0, 0, 0, float(due_in_seconds)),
                first_requested_at=sa.func.now(),
                requested_count=requested_count,
                last_reason="Crud",
                attempt_count=attempt_count,
            )
        )


def standard_project(builder: StoreBuilder, **values: Any) -> ProjectRows:
    """Two buildings, two groups, three layouts (one deleted), objects of every kind."""
    project = builder.project(**values)
    b1, b2 = builder.buildings(project, 2)
    g1, g2 = builder.layout_groups(project, 2)
    l1, l2, l3 = builder.layouts(project, [(g1, "35.5", False), (g1, "60", False), (g2, "80", True)])
    builder.objects(
        project,
        [
            (b1, l1, "Free", "5000000", False),
            (b1, l1, "Free", "4500000.50", False),
            (b1, l2, "Sold", "9000000", False),
            (b1, l2, "Hidden", "1000", False),
            (b2, l2, "Free", "7000000", False),
            (b2, None, "Reserved", None, False),
            (b2, l3, "Free", "100", True),
            (b2, l1, "Free", None, False),
        ],
    )
    return project


def rows_of(conn: Connection, table: sa.Table, ids: Iterable[UUID]) -> dict[UUID, dict[str, Any]]:
    ids = list(ids)
    if not ids:
        return {}
    return {r["id"]: dict(r) for r in conn.execute(sa.select(table).where(table.c.id.in_(ids))).mappings()}


def outbox(conn: Connection) -> list[dict[str, Any]]:
    return [
        dict(r)
        for r in conn.execute(sa.text("SELECT * FROM chessboard.outbox_messages ORDER BY id")).mappings()
    ]


def queue(conn: Connection) -> dict[UUID, dict[str, Any]]:
    return {
        r["project_id"]: dict(r)
        for r in conn.execute(sa.text("SELECT * FROM chessboard.project_recalc_requests")).mappings()
    }

"""Everything one apply call collects before its final writes, and its reports."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pin_chessboard_pipelines.observability.logs import log_event
from pin_chessboard_pipelines.replica.columns import ReplicaEntity
from pin_chessboard_pipelines.replica.context import ApplyContext, ApplyResult
from pin_chessboard_pipelines.talent.snapshots import ERROR_MESSAGE_LIMIT, TalentRecord
from pin_chessboard_pipelines.talent.topic_reader import Source, source_of

log = logging.getLogger("pin_chessboard_pipelines.replica.apply")


class Event(NamedTuple):
    event_type: str  # e.g. pin.chessboard.project-upserted
    aggregate_id: str  # PIN id = Kafka key
    payload: dict[str, Any]


@dataclass
class Quarantine:
    position: int  # in the batch: quarantine rows are written in batch order
    raw: Any
    external_id: str | None
    code: str
    message: str
    source: Source | None = None  # the message it was read from (talent/topic_reader.py)

    def log_fields(self) -> dict[str, Any]:
        return {"ExternalId": self.external_id, "ErrorCode": self.code, "Error": self.message}


@dataclass
class Item:
    position: int  # in the batch
    record: TalentRecord
    raw: Any
    values: dict[str, Any] = field(default_factory=dict)  # upsert parameters
    old: dict[str, Any] | None = None  # the current row, None = create
    rejected: tuple[str, str] | None = None  # (error code, message) of its parents, None = they hold
    source: Source | None = None  # the message it was read from; None = no topic (ApiPull)

    @property
    def talent_id(self) -> str:
        return self.values["external_talent_id"]

    @property
    def tenant(self) -> object:
        """The item's developer PIN id once known (a developer's own; a child's from its parent)."""
        return self.values.get("tenant_id")


@dataclass
class Batch:
    spec: ReplicaEntity
    ctx: ApplyContext
    stage: str
    result: ApplyResult
    quarantine: list[Quarantine] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    touched: dict[str, str] = field(default_factory=dict)  # project PIN id -> tenant id
    requested: set[str] = field(default_factory=set)  # projects whose recalc was requested up front
    # linked parent PIN id (an object's layout, a layout's group) -> (project, tenant), read up front
    linked: dict[str, tuple[str, str]] = field(default_factory=dict)
    # Talent id -> (partition, offset) of its delete read from the topic (docs/talent-source.md#deletes)
    tombstones: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)

    def reject(
        self,
        position: int,
        raw: Any,
        external_id: str | None,
        code: str,
        message: str,
        tenant: object = None,
    ) -> None:
        self.quarantine.append(
            Quarantine(position, raw, external_id, code, message[:ERROR_MESSAGE_LIMIT], source_of(raw))
        )
        self.result.failed += 1
        self.result.count(tenant, 2)

    def applied(self, record: TalentRecord, created: bool, tenant: object = None) -> None:
        self.result.applied += 1
        self.result.created += created
        self.result.count(tenant, 0)
        self.report(record)

    def skipped(self, tenant: object = None) -> None:
        self.result.skipped += 1
        self.result.count(tenant, 1)

    def touch(self, project: tuple[str, str] | None) -> None:
        if project is not None:
            self.touched[project[0]] = project[1]

    def touch_all(self, projects: list[tuple[str, str]]) -> None:
        for project in projects:
            self.touch(project)

    def report(self, record: TalentRecord) -> None:
        """Unknown enum values and unresolved references of an applied item: a warning; the caller
        counts them from the result once its transaction committed (metrics.count_applied)."""
        for enum, value in record.unknown_enums:
            self.result.unknown_enums.append((enum, value))
            self._warn(record, "unknown-enum-value", {"Enum": enum, "Value": value})
        for reference in record.unresolved_references:
            self.result.unresolved_references.append(reference)
            self._warn(record, "unresolved-reference", {"Reference": reference})

    def log_fields(self) -> dict[str, Any]:
        """RunId (an import's), Stage, CorrelationId and DryRun of the batch's log lines."""
        ctx = self.ctx
        run = {} if ctx.run_id is None else {"RunId": ctx.run_id}
        return {**run, "Stage": self.stage, "CorrelationId": ctx.correlation_id, "DryRun": ctx.dry_run}

    def _warn(self, record: TalentRecord, event: str, fields: dict[str, Any]) -> None:
        log_event(log, logging.WARNING, event, **fields, ExternalId=record.talent_id, **self.log_fields())

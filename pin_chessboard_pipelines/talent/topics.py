"""The Talent stages as the import and the topic readers still name them, derived from entities.py.

New code reads entities.py directly (`Entity.stage`, `.name`, `.collection`, `.topic`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pin_chessboard_pipelines import entities
from pin_chessboard_pipelines.store.lock import AdvisoryLock

CONSUMER_GROUP = "pin-chessboard-talent-sync"
TALENT_SYNC_LOCK = AdvisoryLock("Pin:lock:job:chessboard-talent-sync")  # one consumer at a time


@dataclass(frozen=True)
class TalentStage:
    name: str  # TalentImportStage: Developers..PropertyObjects
    entity: str  # snapshot kind in talent-source.md
    collection: str  # /api/v1/{collection}
    topic: str  # compacted topic, key = Talent id
    partitions: int  # partitions the simulator creates the topic with


def _stage(e: entities.Entity) -> TalentStage:
    return TalentStage(e.stage, e.name, e.collection, e.topic, e.partitions)


STAGES: tuple[TalentStage, ...] = tuple(_stage(e) for e in entities.ENTITIES)
DEVELOPERS, PROJECTS, BUILDINGS, LAYOUT_GROUPS, LAYOUTS, PROPERTY_OBJECTS = STAGES

STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
COLLECTIONS: tuple[str, ...] = tuple(s.collection for s in STAGES)
TOPICS: tuple[str, ...] = tuple(s.topic for s in STAGES)

STAGE_BY_NAME: dict[str, TalentStage] = {s.name: s for s in STAGES}
STAGE_BY_ENTITY: dict[str, TalentStage] = {s.entity: s for s in STAGES}
STAGE_BY_COLLECTION: dict[str, TalentStage] = {s.collection: s for s in STAGES}
STAGE_BY_TOPIC: dict[str, TalentStage] = {s.topic: s for s in STAGES}

COLLECTION_BY_STAGE: dict[str, str] = {s.name: s.collection for s in STAGES}
TOPIC_BY_STAGE: dict[str, str] = {s.name: s.topic for s in STAGES}
TOPIC_BY_COLLECTION: dict[str, str] = {s.collection: s.topic for s in STAGES}

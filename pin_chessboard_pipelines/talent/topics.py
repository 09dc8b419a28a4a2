"""Names of the Talent source (talent-source.md): stages, entities, HTTP collections, Kafka topics.

One row per Talent entity, in parent -> child order: the import walks the stages in this order and
TopicReplay replays the topics in this order.
"""

from __future__ import annotations

from dataclasses import dataclass

CONSUMER_GROUP = "pin-chessboard-talent-sync"


@dataclass(frozen=True)
class TalentStage:
    name: str  # TalentImportStage: Developers..PropertyObjects
    entity: str  # snapshot kind in talent-source.md
    collection: str  # /api/v1/{collection}
    topic: str  # compacted topic, key = Talent id
    partitions: int  # partitions the simulator creates the topic with


def _stage(name: str, entity: str, collection: str, partitions: int = 3) -> TalentStage:
    return TalentStage(name, entity, collection, f"talent.chessboard.{collection}.v1", partitions)


DEVELOPERS = _stage("Developers", "developer", "developers")
PROJECTS = _stage("Projects", "project", "projects")
BUILDINGS = _stage("Buildings", "building", "buildings")
LAYOUT_GROUPS = _stage("LayoutGroups", "layoutGroup", "layout-groups")
LAYOUTS = _stage("Layouts", "layout", "layouts")
PROPERTY_OBJECTS = _stage("PropertyObjects", "propertyObject", "property-objects", partitions=6)

STAGES: tuple[TalentStage, ...] = (DEVELOPERS, PROJECTS, BUILDINGS, LAYOUT_GROUPS, LAYOUTS, PROPERTY_OBJECTS)

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

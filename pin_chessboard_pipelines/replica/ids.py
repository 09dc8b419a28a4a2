"""PIN ids are deterministic functions of Talent ids (chessboard-store.md, "Replica tables"),
so a bootstrap and a streaming sync of the same data produce bit-identical rows."""

from __future__ import annotations

import uuid

PIN_NAMESPACE = uuid.UUID("6f1c8a52-1c0e-5c3e-9d1a-7f0b2c4d6e8a")


def pin_id(entity: str, talent_id: uuid.UUID | str) -> uuid.UUID:
    """`entity` is the contract's entity name: developer, project, building, layoutGroup, layout, propertyObject."""
    return uuid.uuid5(PIN_NAMESPACE, f"{entity}:{str(talent_id).lower()}")

"""Why a project's recalc was requested (docs/project-aggregates-recalc.md#queue-and-debounce).

The debounce itself is computed by the SQL in store/sql/recalc_queue.sql (`enqueue_recalc`);
tests/support/debounce.py holds its reference arithmetic, which a test compares with it.
"""

from __future__ import annotations

from enum import StrEnum


class RecalcReason(StrEnum):
    PROPERTY_OBJECT_STATUS_CHANGED = "PropertyObjectStatusChanged"
    PROPERTY_OBJECT_PRICE_CHANGED = "PropertyObjectPriceChanged"
    PROPERTY_OBJECT_UPSERTED = "PropertyObjectUpserted"
    LAYOUT_CHANGED = "LayoutChanged"
    TALENT_SYNC = "TalentSync"
    CRUD = "Crud"

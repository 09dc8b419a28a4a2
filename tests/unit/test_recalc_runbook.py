"""The recalc runbook's pure parts: which project a reference names, and the status table."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from pin_chessboard_pipelines.defs.runbook.definitions import oldest_rows_table, status_metadata
from pin_chessboard_pipelines.errors import Refused
from pin_chessboard_pipelines.recalc.queue import QueueStatus
from pin_chessboard_pipelines.recalc.runbook import (
    DueRow,
    ProjectRef,
    RecalcStatus,
    parse_reference,
    pick_project,
    status_fingerprint,
)


def _ref(name: str, matched_by: str = "Name", deleted: bool = False) -> ProjectRef:
    return ProjectRef(uuid4(), uuid4(), name, uuid4(), "Published", deleted, matched_by)


def test_a_reference_is_a_uuid_or_a_trimmed_name():
    value = uuid4()
    assert parse_reference(f" {value} ") == (value, str(value))
    assert parse_reference("  ЖК Север ") == (None, "ЖК Север")
    with pytest.raises(Refused, match="give a Talent id, a PIN id or a name"):
        parse_reference("   ")


def test_an_id_match_wins_then_the_one_live_name():
    by_id, named = _ref("A", "TalentId"), _ref("B")
    assert pick_project("x", [named, by_id]) is by_id
    live, deleted = _ref("Twin"), _ref("Twin", deleted=True)
    assert pick_project("twin", [live, deleted]) is live
    gone = _ref("Gone", deleted=True)
    assert pick_project("gone", [gone]) is gone


def test_no_project_or_several_live_ones_are_refused_in_one_line():
    with pytest.raises(Refused, match="no project has this Talent id, PIN id or name"):
        pick_project("Nowhere", [])
    one, two = _ref("Twin"), _ref("Twin")
    with pytest.raises(Refused) as refused:
        pick_project("twin", [one, two])
    line = str(refused.value)
    assert "ambiguous" in line and str(one.id) in line and str(two.talent_id) in line and "\n" not in line


def test_the_status_lists_the_oldest_rows_with_names_and_states():
    due_at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    rows = [
        DueRow(uuid4(), "ЖК Север", due_at, 3, "Crud", 5, "boom\nagain", "poison"),
        DueRow(uuid4(), None, due_at, 1, "Import", 0, None, "held"),
    ]
    status = RecalcStatus(QueueStatus(depth=4, due=1, poison=1, next_due_at=due_at, requested=7), 1, rows)
    poison, held = [record.data for record in oldest_rows_table(status).records]
    assert poison == {
        "project": "ЖК Север",
        "project_id": str(rows[0].project_id),
        "due_at": "2026-12-01T10:00:00+00:00",
        "state": "poison",
        "attempts": 5,
        "requests": 3,
        "reason": "Crud",
        "last_error": "boom again",
    }
    assert held["project"] == "(not in the store)" and held["state"] == "held" and held["last_error"] == ""
    metadata = {k: v.value for k, v in status_metadata(status).items()}
    assert metadata["queue_depth"] == 4 and metadata["held"] == 1 and metadata["poison"] == 1
    assert metadata["next_due_at"] == "2026-12-01T10:00:00+00:00"
    empty = RecalcStatus(QueueStatus(0, 0, 0, None, 0), 0, [])
    assert oldest_rows_table(empty).records == []


def test_the_fingerprint_changes_with_what_the_status_shows_only():
    due_at = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    waiting = DueRow(uuid4(), "ЖК Север", due_at, 1, "Crud", 0, None, "waiting")
    status = RecalcStatus(
        QueueStatus(depth=1, due=0, poison=0, next_due_at=due_at, requested=1), 0, [waiting]
    )
    same = RecalcStatus(QueueStatus(1, 0, 0, due_at, 1), 0, [DueRow(*vars(waiting).values())])
    assert status_fingerprint(status) == status_fingerprint(same)
    now_due = RecalcStatus(QueueStatus(1, 1, 0, due_at, 1), 0, [DueRow(**{**vars(waiting), "state": "due"})])
    assert status_fingerprint(now_due) != status_fingerprint(status)
    assert [r.data["state"] for r in oldest_rows_table(status).records] == ["waiting"]

"""TalentInitialImportRequest validation, scopes, the result JSON and the lock key: pure functions."""

from __future__ import annotations

import json

import pytest

from pin_chessboard_pipelines.errors import IMPORT_INVALID_REQUEST, Refused
from pin_chessboard_pipelines.talent_import.request import (
    ALL,
    ImportMode,
    Scope,
    build_request,
)
from pin_chessboard_pipelines.talent_import.result import (
    StageCounters,
    TalentInitialImportResult,
    stages_from_mapping,
)

DEVELOPER = "8a1b0f3e-56c4-8d2a-a000-000000000001"
PROJECT = "8a1b0f3e-56c4-8d2a-a000-000000000002"


def _refused(**kwargs) -> str:
    with pytest.raises(Refused) as refused:
        build_request(**kwargs)
    assert refused.value.code == IMPORT_INVALID_REQUEST
    return refused.value.line()


def test_defaults_are_the_seeds():
    request = build_request()
    assert request.mode is ImportMode.API_PULL
    assert (request.page_size, request.dry_run, request.workers) == (500, False, 2)
    assert request.scopes == (ALL,) and request.scope_keys == [""]
    assert len(request.correlation_id) == 36  # a generated Guid


def test_both_filters_are_refused():
    line = _refused(developer_ids=[DEVELOPER], project_id=PROJECT)
    assert line.startswith("CHESSBOARD_IMPORT_INVALID_REQUEST: DeveloperIdFilter and ProjectIdFilter")


@pytest.mark.parametrize("page_size", [0, -1, 2001, True])
def test_page_size_out_of_range_is_refused(page_size):
    assert "PageSize" in _refused(page_size=page_size)


@pytest.mark.parametrize("page_size", [1, 500, 2000])
def test_page_size_in_range(page_size):
    assert build_request(page_size=page_size).page_size == page_size


def test_unknown_mode_and_bad_ids_are_refused():
    assert "Mode 'Replay'" in _refused(mode="Replay")
    assert "DeveloperIdFilter 'nope'" in _refused(developer_ids=["nope"])
    assert "ProjectIdFilter" in _refused(project_id="12")
    assert "workers" in _refused(workers=0)


def test_filters_become_scopes():
    assert build_request(developer_ids=[DEVELOPER.upper()]).scope_keys == [DEVELOPER]
    assert build_request(developer_ids=[DEVELOPER]).developer_id_filter == DEVELOPER
    two = build_request(developer_ids=[DEVELOPER, PROJECT, DEVELOPER])
    assert two.scope_keys == [DEVELOPER, PROJECT] and two.developer_id_filter is None
    project = build_request(project_id=PROJECT)
    assert project.scope_keys == [f"project:{PROJECT}"]
    assert project.scopes == (Scope(project_id=PROJECT),)


@pytest.mark.parametrize("scope", [ALL, Scope(developer_id=DEVELOPER), Scope(project_id=PROJECT)])
def test_a_scope_key_round_trips(scope):
    assert Scope.from_key(scope.key) == scope
    assert len(scope.key) <= 64  # talent_import_pages.scope


def test_the_result_json_is_the_contracts():
    result = TalentInitialImportResult(
        run_id="r",
        correlation_id="c",
        mode="ApiPull",
        status="Completed",
        dry_run=False,
        duration_seconds=12.34567,
        stages=stages_from_mapping({"Projects": {"planned": 3, "applied": 2, "skipped": 1, "pages": 9}}),
    )
    line = result.to_json()
    assert "\n" not in line
    data = json.loads(line)
    assert list(data) == ["runId", "correlationId", "mode", "status", "dryRun", "durationSeconds", "stages"]
    assert list(data["stages"]) == [
        "Developers",
        "Projects",
        "Buildings",
        "LayoutGroups",
        "Layouts",
        "PropertyObjects",
    ]
    assert data["stages"]["Projects"] == {"planned": 3, "applied": 2, "skipped": 1, "failed": 0}
    assert data["stages"]["Developers"] == StageCounters().to_dict()
    assert data["durationSeconds"] == 12.346
    assert result.totals == StageCounters(planned=3, applied=2, skipped=1)

"""Pure pieces of the import's Dagster surface: partition keys by developer name, progress figures."""

from __future__ import annotations

from pin_chessboard_pipelines.defs.talent_import.partitions import (
    developer_id_of,
    first_sight_key,
    partition_key,
    slug,
)
from pin_chessboard_pipelines.talent_import.progress import (
    ETA_NONE,
    ETA_PLAN,
    ETA_PREVIOUS_RUN,
    Eta,
    estimate_eta,
    progress_fields,
)

DEVELOPER = "b4294e04-0840-861c-8000-000000000000"


def test_a_partition_key_reads_as_the_developer_and_gives_back_its_id():
    assert slug("ГК Основа 1") == "gk-osnova-1"
    assert slug("Объединённая Строй-Компания «Подъём» №5") == "obedinennaya-stroy-kompaniya-podem-no5"
    key = partition_key(DEVELOPER, "ГК Основа 1")
    assert key == f"gk-osnova-1-{DEVELOPER}"
    assert developer_id_of(key) == DEVELOPER
    assert developer_id_of(DEVELOPER) == DEVELOPER  # keys of older deployments: the bare id
    assert partition_key(DEVELOPER, "«»") == DEVELOPER  # nothing left of the name


def test_a_developer_first_seen_keeps_a_partition_it_already_has():
    other = "c0000000-0000-4000-8000-000000000001"
    assert first_sight_key(DEVELOPER, "ГК Основа 1", []) == f"gk-osnova-1-{DEVELOPER}"
    # an older deployment's partition of an earlier name (or the bare id) is adopted, not doubled
    known = [f"gk-alfa-1-{other}", f"gk-sever-1-{DEVELOPER}", f"gk-osnova-1-{DEVELOPER}"]
    assert first_sight_key(DEVELOPER.upper(), "ГК Основа 1", known) == f"gk-sever-1-{DEVELOPER}"
    assert first_sight_key(DEVELOPER, "ГК Основа 1", [DEVELOPER]) == DEVELOPER


def test_progress_counts_this_runs_items_only():
    row = {"pages": 10, "done": 4, "walked": True, "planned": 1000, "processed": 400}
    figures = progress_fields(row, items_before=200, elapsed=10.0)  # 200 done by an earlier run
    assert figures == {
        "Pages": "4/10",
        "Items": 200,
        "ItemsPerSecond": "20",
        "EtaSeconds": "~30",
        "EtaBasis": "plan",
    }
    walking = progress_fields({**row, "walked": False}, items_before=0, elapsed=10.0)
    assert walking["Pages"] == "4/10+" and walking["EtaSeconds"] == "unknown"
    assert walking["EtaBasis"] == "none"
    # still walking, but the last Completed run of the same scopes read 2000 items of the stage
    guessed = progress_fields({**row, "walked": False}, items_before=0, elapsed=10.0, previous_planned=2000)
    assert guessed["EtaSeconds"] == "~40" and guessed["EtaBasis"] == "previous-run"
    assert progress_fields(None, 0, 1.0)["Pages"] == "0/0+"


def test_the_eta_is_estimated_as_soon_as_a_total_and_a_rate_exist():
    walking = {"walked": False, "planned": 600, "processed": 300}
    assert estimate_eta(**walking, rate=0.0, previous_planned=1200) == Eta(None, ETA_NONE)  # no rate yet
    assert estimate_eta(**walking, rate=100.0, previous_planned=None) == Eta(None, ETA_NONE)
    assert estimate_eta(**walking, rate=100.0, previous_planned=1200) == Eta(9.0, ETA_PREVIOUS_RUN)
    # the walk already planned more than the previous run read: the plan so far is the floor
    assert estimate_eta(**walking, rate=100.0, previous_planned=400) == Eta(3.0, ETA_PREVIOUS_RUN)
    # the walk ended: the plan is the total, whatever the previous run read
    walked = {**walking, "walked": True}
    assert estimate_eta(**walked, rate=100.0, previous_planned=5000) == Eta(3.0, ETA_PLAN)
    assert estimate_eta(**{**walked, "processed": 600}, rate=100.0, previous_planned=None) == Eta(
        0.0, ETA_PLAN
    )
    assert Eta(9.4, ETA_PREVIOUS_RUN).fields() == {"EtaSeconds": "~9", "EtaBasis": "previous-run"}
    assert Eta(None, ETA_NONE).fields() == {"EtaSeconds": "unknown", "EtaBasis": "none"}

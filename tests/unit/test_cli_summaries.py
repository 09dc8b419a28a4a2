"""One summary line for a job of several steps (`pin-chessboard recalc drain` with several drains)."""

from pin_chessboard_pipelines.cli.jobs import merge_summaries


def test_one_step_keeps_its_summary():
    assert merge_summaries([{"recalculated": 3, "stopped": "done"}]) == {"recalculated": 3, "stopped": "done"}


def test_counters_add_up_agreed_values_stay_and_the_rest_is_listed_per_step():
    merged = merge_summaries(
        [
            {"recalculated": 3, "republished": {"project": 3}, "stopped": "done", "error": None},
            {"recalculated": 2, "republished": {"project": 1}, "stopped": "failed", "error": "x"},
        ]
    )
    assert merged["recalculated"] == 5
    assert merged["republished"] == {"project": 4}
    assert merged["stopped"] == ["done", "failed"]
    assert merged["error"] == "x"  # the first step's error there is

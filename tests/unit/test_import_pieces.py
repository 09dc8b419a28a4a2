"""Small pieces of the import without a database: the page cache, the progress line, asset names."""

from __future__ import annotations

import threading

import pytest

from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.talent_import.model import StageReport
from pin_chessboard_pipelines.talent_import.page_cache import PageCache
from pin_chessboard_pipelines.talent_import.progress import render
from pin_chessboard_pipelines.talent_import.result import StageCounters


def _never() -> bool:
    return False


def test_the_cache_hands_items_over_once():
    cache = PageCache(capacity=2)
    cache.put(1, [{"id": "a"}], _never, lambda ids: set())
    assert cache.take(1) == [{"id": "a"}]
    assert cache.take(1) is None  # a second claimer reads the staged items


def test_a_full_cache_drops_pages_claimed_elsewhere_first():
    cache = PageCache(capacity=2, evict_after=30)
    cache.put(1, [], _never, lambda ids: set())
    cache.put(2, [], _never, lambda ids: set())
    asked = []

    def claimed_elsewhere(ids):
        asked.append(list(ids))
        return {1}

    cache.put(3, [], _never, claimed_elsewhere)  # no wait: page 1 went to another process
    assert asked == [[1, 2]]
    assert cache.take(1) is None and cache.take(2) == [] and cache.take(3) == []


def test_a_full_cache_waits_for_a_local_worker():
    cache = PageCache(capacity=1, evict_after=30)
    cache.put(1, ["first"], _never, lambda ids: set())
    taken = threading.Event()

    def worker():
        assert cache.take(1) == ["first"]
        taken.set()

    def claimed_elsewhere(ids):
        # the walker found the cache full: a local worker takes the page meanwhile
        threading.Thread(target=worker).start()
        assert taken.wait(5)
        return set()

    cache.put(2, ["second"], _never, claimed_elsewhere)
    assert cache.take(2) == ["second"]


def test_a_full_cache_evicts_the_oldest_page_at_the_deadline():
    cache = PageCache(capacity=1, evict_after=0)
    cache.put(1, ["old"], _never, lambda ids: set())
    cache.put(2, ["new"], _never, lambda ids: set())
    assert cache.take(1) is None and cache.take(2) == ["new"]


def _row(pages, done, walked=True, processed=0):
    return {"pages": pages, "done": done, "walked": walked, "processed": processed}


def test_the_progress_line_names_the_stage_being_worked_on():
    progress = {
        "Developers": _row(1, 1),
        "Projects": _row(2, 2),
        "Buildings": _row(4, 1, walked=False, processed=100),
    }
    line = render(progress)
    assert "stage 3/6 Buildings: 1/4+ pages, 100 items" in line
    assert render({s.stage: _row(1, 1) for s in ENTITIES}).endswith("6/6 stages done")
    assert "stage 1/6 Developers: 0/0+ pages" in render({})


@pytest.mark.parametrize(
    ("applied", "skipped", "failed", "seconds", "rate"),
    [(100, 50, 50, 2.0, 100.0), (0, 0, 0, 0.0, 0.0)],
)
def test_items_per_second_counts_every_processed_item(applied, skipped, failed, seconds, rate):
    report = StageReport("PropertyObjects", StageCounters(200, applied, skipped, failed), 4, 4, seconds)
    assert report.items_per_second == rate


def test_a_re_execution_is_refused_only_once_its_import_run_completed():
    from datetime import datetime

    from pin_chessboard_pipelines.talent_import.runs import resume_refusal

    assert resume_refusal("c1", None) is None  # its first run never started the import: it starts it
    for status in ("Failed", "Cancelled", "Running"):
        assert resume_refusal("c1", {"id": "r1", "status": status, "finished_at": None}) is None
    done = {"id": "r1", "status": "Completed", "finished_at": datetime(2026, 12, 3, 17, 0, 5)}
    assert resume_refusal("c1", done) == (
        "nothing to resume: import run r1 (correlation id c1) Completed at 2026-12-03 17:00:05 UTC; "
        "a re-execution starts no new import: launch the assets or talent_full_bootstrap for one"
    )

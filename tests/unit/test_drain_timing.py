"""The long-lived drain's timing (docs/project-aggregates-recalc.md#drain), without a database."""

from pin_chessboard_pipelines.recalc.drain_timing import (
    drain_run_key,
    needs_drain_run,
    next_attempt,
    poll_wait,
    slot_for,
)

L, LEAD, POLL = 300.0, 30.0, 1.0


def test_a_run_serves_the_slot_it_starts_in():
    slot = slot_for(1_000_000.0, L, LEAD)  # 1_000_000 = slot 3333 + 100 s
    assert slot.index == 3333 and slot.ends_at == 3334 * L


def test_a_run_requested_within_the_lead_of_a_boundary_takes_the_next_slot():
    boundary = 3334 * L
    assert slot_for(boundary - LEAD + 0.1, L, LEAD).index == 3334
    assert slot_for(boundary - LEAD - 0.1, L, LEAD).index == 3333
    assert slot_for(boundary - LEAD + 0.1, L, LEAD).ends_at == boundary + L


def test_one_slot_per_lifetime_bounds_the_runs_an_hour():
    # the sensor asks every 5 s for an hour under continuous requests: one slot (run key) each 300 s
    slots = {slot_for(t * 5.0, L, LEAD).index for t in range(720)}
    keys = {drain_run_key(index, 0) for index in slots}
    assert len(keys) <= 3600 / L + 1  # the hour's ends may cut two slots


def test_the_drain_sleeps_until_the_next_due_row_at_most_one_poll():
    assert poll_wait(0.0, 100.0, None, POLL) == POLL  # empty queue: look again after a poll
    assert poll_wait(0.0, 100.0, 0.3, POLL) == 0.3  # a row falls due in 0.3 s
    assert poll_wait(0.0, 100.0, 25.0, POLL) == POLL  # a row forced due now would wait one poll at most
    assert poll_wait(0.0, 100.0, -2.0, POLL) == 0.0  # due already (left by the last pass's budget)


def test_the_drain_ends_with_its_slot():
    assert 0.39 < poll_wait(99.6, 100.0, None, POLL) < 0.41
    assert poll_wait(100.0, 100.0, 0.1, POLL) is None
    assert poll_wait(120.0, 100.0, None, POLL) is None


def test_the_sensor_starts_a_run_for_rows_due_within_the_lead():
    assert not needs_drain_run(None, LEAD)  # nothing queued beyond what the live runs drain
    assert not needs_drain_run(45.0, LEAD)  # a later tick starts it, still ahead of its DueAt
    assert needs_drain_run(29.0, LEAD)
    assert needs_drain_run(-3.0, LEAD)  # due already and no live run


def test_a_slot_whose_run_ended_early_gets_a_new_run_key():
    assert next_attempt(None, 0, 7) == 0
    assert next_attempt(6, 2, 7) == 0
    assert next_attempt(7, 0, 7) == 1
    assert drain_run_key(7, 0) == "recalc-drain:7"
    assert drain_run_key(7, 1) == "recalc-drain:7.1"

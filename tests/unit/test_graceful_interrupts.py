"""graceful_interrupts (defs/singleton.py): a run's termination signal inside the block sets the flag
the loop polls, and the handlers of before the block are back after it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from pin_chessboard_pipelines.defs.singleton import TERMINATION_SIGNALS, graceful_interrupts


class Raised(Exception):
    pass


def _raise(signum, frame):
    raise Raised(signum)


@pytest.mark.parametrize("signum", TERMINATION_SIGNALS)
def test_a_termination_signal_inside_the_block_is_a_flag_and_the_handlers_come_back(signum):
    previous = {s: signal.signal(s, _raise) for s in TERMINATION_SIGNALS}
    try:
        with graceful_interrupts() as interrupted:
            assert not interrupted()
            os.kill(os.getpid(), signum)
            assert interrupted()  # the loop stops between units of work; nothing was raised
        assert {s: signal.getsignal(s) for s in TERMINATION_SIGNALS} == dict.fromkeys(
            TERMINATION_SIGNALS, _raise
        )
        with pytest.raises(Raised):
            os.kill(os.getpid(), signum)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def test_off_the_main_thread_the_loop_is_never_told_to_stop():
    seen = []

    def body():
        with graceful_interrupts() as interrupted:
            seen.append(interrupted())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [False]

import os
import tempfile
from collections.abc import Iterator

import pytest

# Tests never touch the developer's local state (.state/): the Dagster home and scratch files go
# to a temporary folder. Set before any project module is imported.
_STATE = tempfile.mkdtemp(prefix="pin-chessboard-test-state-")
os.environ.setdefault("PIN_CHESSBOARD_STATE_DIR", _STATE)
# A pytest-xdist worker inherits the controller's environment, this variable included: each worker
# gets a state folder of its own in it.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER:
    os.environ["PIN_CHESSBOARD_STATE_DIR"] = os.path.join(os.environ["PIN_CHESSBOARD_STATE_DIR"], _WORKER)
os.makedirs(os.environ["PIN_CHESSBOARD_STATE_DIR"], exist_ok=True)

pytest_plugins = [
    "tests.support.postgres",
    "tests.support.kafka",
    "tests.support.talent_sim",
    "tests.support.contracts",
]


@pytest.fixture(autouse=True)
def _fresh_forkserver() -> Iterator[None]:
    """A test that runs the multiprocess executor in this process starts multiprocessing's
    forkserver, and the forkserver's step processes keep ITS environment (the test's database URL,
    DAGSTER_HOME): stopped after each test, the next test's steps get the next test's. A run worker
    or a command is one process per run, so the product never needs this."""
    yield
    from multiprocessing import forkserver

    forkserver._forkserver._stop()  # the stdlib's own stop "used by unit tests"

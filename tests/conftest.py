import os
import tempfile

# Tests never touch the developer's local state (.state/): metrics files and the Dagster home go
# to a temporary folder. Set before any project module is imported.
_STATE = tempfile.mkdtemp(prefix="pin-chessboard-test-state-")
os.environ.setdefault("PIN_CHESSBOARD_STATE_DIR", _STATE)
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", os.path.join(_STATE, "metrics"))
os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)

pytest_plugins = [
    "tests.support.postgres",
    "tests.support.kafka",
    "tests.support.talent_sim",
    "tests.support.dagster_stack",
]

"""The terminal of a CLI command that runs a Dagster run prints each of the project's log lines once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from pin_chessboard_pipelines.cli import DAGSTER_RECORD_ATTR
from tests.support.dagster_private import LOG_RECORD_METADATA_ATTR

SCRIPT = textwrap.dedent(
    """
    import logging
    import dagster as dg
    from pin_chessboard_pipelines.cli import configure_logging

    configure_logging(verbose=False)
    log = logging.getLogger("pin_chessboard_pipelines.talent_import")

    @dg.op
    def page(context):
        log.info("page-applied PageNo=7")

    @dg.job
    def job():
        page()

    log.info("before-the-run")
    overrides = {"python_logs": {"managed_python_loggers": ["pin_chessboard_pipelines"]}}
    with dg.instance_for_test(overrides=overrides) as instance:
        assert job.execute_in_process(instance=instance).success
    """
)


def test_a_captured_record_is_printed_by_the_runs_console_logger_only():
    assert DAGSTER_RECORD_ATTR == LOG_RECORD_METADATA_ATTR  # the name the filter relies on
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("page-applied PageNo=7") == 1, done.stderr
    assert done.stderr.count("before-the-run") == 1  # outside a run: the terminal's handler prints it

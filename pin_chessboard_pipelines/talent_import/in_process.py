"""The whole import in this process (the tests' and the benchmarks' path; a Dagster run works its
stages as steps instead, defs/talent_import/)."""

from __future__ import annotations

from collections.abc import Callable

from pin_chessboard_pipelines.talent_import.model import ApplyFn, ImportOptions
from pin_chessboard_pipelines.talent_import.request import TalentInitialImportRequest
from pin_chessboard_pipelines.talent_import.result import TalentInitialImportResult
from pin_chessboard_pipelines.talent_import.runner import ImportSession
from pin_chessboard_pipelines.talent_import.sources import ImportSource


def run_import(
    url: str,
    request: TalentInitialImportRequest,
    source: ImportSource,
    *,
    options: ImportOptions | None = None,
    apply: ApplyFn | None = None,
    should_stop: Callable[[], bool] | None = None,
    dagster_run_id: str | None = None,
) -> TalentInitialImportResult:
    """The whole import in this process: refusals first, then every stage, then the result.

    Raises Refused (source unavailable, lock held) before writing anything; a failed stage ends the
    run Failed (resumable) and is reported in the result, not raised. The feature flag is the
    caller's (talent/flag.py), asked by each entry point.
    """
    session = ImportSession(
        url,
        request,
        source,
        options=options,
        apply=apply,
        should_stop=should_stop,
        dagster_run_id=dagster_run_id,
    )
    try:
        session.open()
    except BaseException:
        session.source.close()
        raise
    return session.run_stages()

"""The metadata of a stage's materialization: per developer partition its own counters first, the
items no partition counts next, then the import run's and this Dagster run's figures, each key
labelled whose it is (defs/metadata.py describes each key)."""

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.partitions import developer_id_of
from pin_chessboard_pipelines.entities import DEVELOPER, pin_id
from pin_chessboard_pipelines.talent_import import runs
from pin_chessboard_pipelines.talent_import.result import StageCounters
from pin_chessboard_pipelines.talent_import.runner import ImportSession, StageReport


def counter_metadata(prefix: str, counters: StageCounters) -> dict[str, dg.MetadataValue]:
    return {
        f"{prefix}planned": dg.MetadataValue.int(counters.planned),
        f"{prefix}applied": dg.MetadataValue.int(counters.applied),
        f"{prefix}skipped": dg.MetadataValue.int(counters.skipped),
        f"{prefix}failed": dg.MetadataValue.int(counters.failed),
    }


def run_metadata(
    session: ImportSession, report: StageReport, figures: runs.StageFigures
) -> dict[str, dg.MetadataValue]:
    """What every partition of the run shares, each key labelled whose it is: the import run's
    figures (`import_`: every developer of it), then this Dagster run's own work (`run_`: every
    partition of the run repeats it, so a sum over partitions is no total; defs/metadata.py
    describes each key)."""
    return {
        **counter_metadata("import_", report.counters),
        "import_run_id": dg.MetadataValue.text(str(session.run_id)),
        "correlation_id": dg.MetadataValue.text(session.correlation_id),
        "import_status": dg.MetadataValue.text(str(session.run_row["status"])),
        "scopes": dg.MetadataValue.text(", ".join(k or "all developers" for k in session.scope_keys)),
        "dry_run": dg.MetadataValue.bool(bool(session.run_row["dry_run"])),
        "import_pages": dg.MetadataValue.int(report.pages),
        "run_pages_processed": dg.MetadataValue.int(figures.pages),
        "run_processes": dg.MetadataValue.int(figures.processes),
        "run_duration_seconds": dg.MetadataValue.float(round(figures.seconds, 3)),
        "run_items_processed": dg.MetadataValue.int(figures.items),
        "run_items_per_second": dg.MetadataValue.float(round(figures.items_per_second, 1)),
        "run_page_p99_ms": dg.MetadataValue.float(round(figures.page_p99_ms, 1)),
    }


def partition_metadata(
    partition_keys: list[str],
    by_tenant: dict[str, StageCounters],
    run_wide: dict[str, dg.MetadataValue],
    names: dict[str, str] | None = None,
) -> dict[str, dict[str, dg.MetadataValue]]:
    """Partition key -> its materialization's metadata, in the order the asset's page lists it: the
    developer's own counters of the stage (tenant = the developer's PIN id) first, the items no
    partition counts next, the import run's and this Dagster run's figures after. `names`: Talent id
    (lower case) -> the developer's current name (its key keeps the first one)."""
    unattributed = counter_metadata("unattributed_", by_tenant.get("", StageCounters()))
    metadata = {}
    for key in partition_keys:
        developer_id = developer_id_of(key)
        own = by_tenant.get(str(pin_id(DEVELOPER.name, developer_id)), StageCounters())
        metadata[key] = {
            "developer_id": dg.MetadataValue.text(developer_id),
            "developer_name": dg.MetadataValue.text((names or {}).get(developer_id.lower(), "")),
            **counter_metadata("", own),
            **unattributed,
            **run_wide,
        }
    return metadata

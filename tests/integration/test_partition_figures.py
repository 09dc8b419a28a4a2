"""A stage's developer partitions carry their own figures: summed over the partitions of a run (and
the items no partition counts) they give the import's; every figure of the whole run is labelled
so (`import_…`, `run_…`), never one a partition would seem to own."""

from __future__ import annotations

import dagster as dg
import pytest

from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.defs.talent_import import config as talent_config
from pin_chessboard_pipelines.defs.talent_import.definitions import definitions
from pin_chessboard_pipelines.entities import ENTITIES
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

pytestmark = pytest.mark.slow

SPEC = DatasetSpec(developers=3, projects_per_developer=2, objects_per_project=6)
COUNTERS = ("planned", "applied", "skipped", "failed")
RUN_WIDE = ("import_", "run_", "unattributed_")  # figures of the whole run, labelled so


def test_partition_figures_sum_to_the_imports_and_run_wide_ones_are_labelled(monkeypatch, db_url, talent_sim):
    sim = talent_sim(SPEC)
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", db_url)
    monkeypatch.setenv("TALENT_API_URL", sim.url)
    developers = [dataset.entity_id(SPEC, "developers", i) for i in range(SPEC.developers)]
    defs = dg.Definitions.merge(
        definitions(),
        dg.Definitions(resources={"chessboard": ChessboardResource()}, executor=dg.in_process_executor),
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(talent_config.TALENT_DEVELOPERS.name, developers)
        result = defs.resolve_job_def(talent_config.IMPORT_JOB).execute_in_process(
            instance=instance,
            run_config={"resources": {"talent_import": {"config": {"page_size": 4}}}},
            tags={
                "dagster/asset_partition_range_start": developers[0],
                "dagster/asset_partition_range_end": developers[-1],
            },
        )
        assert result.success
    for stage in ENTITIES:
        key = talent_config.ASSET_KEYS[stage.stage]
        partitions = [
            e.event_specific_data.materialization.metadata
            for e in result.all_events
            if e.event_type_value == "ASSET_MATERIALIZATION" and e.asset_key == key
        ]
        assert len(partitions) == SPEC.developers
        for metadata in partitions:
            numbers = {
                name
                for name, value in metadata.items()
                if isinstance(value, dg.IntMetadataValue | dg.FloatMetadataValue)
            }
            # a number no prefix labels is the partition's own: a sum over partitions means something
            assert numbers - {n for n in numbers if n.startswith(RUN_WIDE)} == set(COUNTERS), stage
            assert metadata["run_items_processed"].value >= metadata["applied"].value
        for counter in COUNTERS:
            own = sum(m[counter].value for m in partitions)
            first = partitions[0]
            assert own + first[f"unattributed_{counter}"].value == first[f"import_{counter}"].value
        if stage.collection == "property-objects":  # every object has its developer
            assert sum(m["planned"].value for m in partitions) == dataset.count(SPEC, stage.collection)

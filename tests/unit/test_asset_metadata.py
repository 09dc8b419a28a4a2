"""Every asset of the definitions carries the metadata standards (defs/metadata.py)."""

from __future__ import annotations

import dagster as dg

from pin_chessboard_pipelines.defs.metadata import ASSET_TABLES, COLUMN_SCHEMA_KEY, TABLE_NAME_KEY


def _nodes():
    from pin_chessboard_pipelines.definitions import defs as load_defs

    defs = load_defs()

    graph = defs.get_repository_def().asset_graph
    return {key.to_user_string(): graph.get(key) for key in graph.get_all_asset_keys()}


def test_every_asset_has_owners_tags_kinds_and_a_description():
    for name, node in _nodes().items():
        assert node.owners and all(o.startswith("team:") for o in node.owners), name
        assert node.kinds, name
        assert node.description, name
        assert node.tags["system"] == "pin-chessboard" and node.tags["domain"] == node.group_name, name


def test_table_assets_have_their_column_schema_from_the_models():
    nodes = _nodes()
    for name, table in ASSET_TABLES.items():
        metadata = nodes[name].metadata
        assert metadata[TABLE_NAME_KEY] == f"{table.schema}.{table.name}"
        schema = metadata[COLUMN_SCHEMA_KEY]
        schema = getattr(schema, "schema", schema)
        assert isinstance(schema, dg.TableSchema)
        assert [c.name for c in schema.columns] == [c.name for c in table.columns], name
        for column in schema.columns:
            assert column.type and column.type != "string", (name, column.name)
            assert column.description, (name, column.name)
    inventory = nodes["project_inventory_daily"].metadata[COLUMN_SCHEMA_KEY]
    types = {c.name: c.type for c in getattr(inventory, "schema", inventory).columns}
    assert types["price_min"] == "numeric" and types["project_id"] == "uuid" and types["day"] == "date"


def test_assets_defined_by_code_link_to_it_and_describe_their_metadata_keys():
    nodes = _nodes()
    for name in ("developers", "property_objects", "project_inventory_daily"):
        references = nodes[name].metadata["dagster/code_references"]
        assert references.code_references, name
        assert "metadata_keys" in nodes[name].metadata, name
    for name in ("chessboard_aggregates", "pin_chessboard_events"):
        assert "metadata_keys" in nodes[name].metadata, name


def test_the_inventory_asset_is_daily_in_the_analytics_group_after_the_aggregates():
    node = _nodes()["project_inventory_daily"]
    assert node.group_name == "analytics"
    assert isinstance(node.partitions_def, dg.DailyPartitionsDefinition)
    assert {k.to_user_string() for k in node.parent_keys} == {"chessboard_aggregates", "property_objects"}
    assert node.kinds == {"pandas", "postgres"}


def test_a_stage_partition_lists_its_developers_figures_first_and_every_key_has_one_description():
    from pin_chessboard_pipelines.defs.metadata import METADATA_KEY_DESCRIPTIONS
    from pin_chessboard_pipelines.defs.talent_import.stage_metadata import partition_metadata
    from pin_chessboard_pipelines.entities import DEVELOPER, pin_id
    from pin_chessboard_pipelines.talent_import.result import StageCounters

    developer = "b4294e04-0840-861c-8000-000000000000"
    key = f"gk-osnova-1-{developer}"
    by_tenant = {
        str(pin_id(DEVELOPER.name, developer)): StageCounters(planned=400, applied=390, skipped=6, failed=4),
        "": StageCounters(planned=2, failed=2),
    }
    run_wide = {
        "import_planned": dg.MetadataValue.int(1200),
        "run_items_per_second": dg.MetadataValue.float(9.0),
    }
    metadata = partition_metadata([key], by_tenant, run_wide, {developer: "ГК Основа 1"})[key]
    assert list(metadata)[:6] == ["developer_id", "developer_name", "planned", "applied", "skipped", "failed"]
    assert metadata["developer_name"].value == "ГК Основа 1"
    assert metadata["planned"].value == 400 and metadata["failed"].value == 4
    assert metadata["unattributed_failed"].value == 2
    assert list(metadata).index("import_planned") > list(metadata).index("unattributed_failed")
    described = METADATA_KEY_DESCRIPTIONS["talent_import"]
    assert list(described)[:6] == list(metadata)[:6]  # the metadata_keys table reads in the same order
    assert set(metadata) <= set(described)
    node = _nodes()["property_objects"]
    assert "| `run_items_per_second` |" in node.metadata["metadata_keys"].value
    assert "run_items_per_second" not in (node.description or "")  # described once: in metadata_keys


def test_the_assets_with_keys_of_their_own_read_them_from_the_one_table():
    from pin_chessboard_pipelines.defs.metadata import ASSET_METADATA_KEY_DESCRIPTIONS

    nodes = _nodes()
    for name, keys in ASSET_METADATA_KEY_DESCRIPTIONS.items():
        table = nodes[name].metadata["metadata_keys"].value
        assert all(f"| `{key}` |" in table for key in keys), name
    assert "| `queue_depth` |" not in nodes["chessboard_aggregates"].metadata["metadata_keys"].value

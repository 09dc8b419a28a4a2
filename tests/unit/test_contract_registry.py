"""Contract versions as configuration (events/contracts.py): which versions are published, where
their builders and schemas come from, and the one-line error for a version nobody defined."""

from __future__ import annotations

import pytest

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.events import contracts, exact_json
from pin_chessboard_pipelines.events.payloads import BUILDING_UPSERTED, PROJECT_UPSERTED, project_upserted
from pin_chessboard_pipelines.events.schema_compat import breaking_changes
from pin_chessboard_pipelines.settings import load_settings
from tests.support import contract_v2
from tests.support.contracts import payload_errors
from tests.unit.test_event_contracts import HANDBOOK, project_row

V2 = {"CHESSBOARD_CONTRACT_BUILDERS": contract_v2.MODULE}


def test_version_1_alone_by_default():
    assert contracts.published({}) == (contracts.V1,)
    assert load_settings({}).contract_versions == (1,)


def test_the_versions_named_in_their_order_with_a_builders_module():
    published = contracts.published({**V2, "CHESSBOARD_CONTRACT_VERSIONS": "2,1"})
    assert [c.version for c in published] == [2, 1]
    assert load_settings({**V2, "CHESSBOARD_CONTRACT_VERSIONS": "1,2"}).contract_builders == (
        contract_v2.MODULE,
    )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"CHESSBOARD_CONTRACT_VERSIONS": "3"}, "no payload builder for contract version 3 (known: 1)"),
        (
            {**V2, "CHESSBOARD_CONTRACT_VERSIONS": "2,3"},
            "no payload builder for contract version 3 (known: 1, 2)",
        ),
        ({"CHESSBOARD_CONTRACT_VERSIONS": "2"}, "no payload builder for contract version 2 (known: 1)"),
        ({"CHESSBOARD_CONTRACT_VERSIONS": "1,1"}, "expected distinct versions"),
        ({"CHESSBOARD_CONTRACT_VERSIONS": "0"}, "expected distinct versions"),
        ({"CHESSBOARD_CONTRACT_BUILDERS": "not a module"}, "expected Python module names"),
    ],
)
def test_an_unknown_or_invalid_version_is_a_config_error(env, line):
    with pytest.raises(ConfigError) as error:
        contracts.published(env)
    assert line in str(error.value) and "\n" not in str(error.value)


def test_a_version_keeps_the_payload_and_schema_of_the_event_types_it_does_not_change():
    v1, v2 = contracts.published({**V2, "CHESSBOARD_CONTRACT_VERSIONS": "1,2"})
    payload = {"id": "x", "version": 1}
    assert v2.build(BUILDING_UPSERTED, payload) is payload
    assert v2.topic(BUILDING_UPSERTED) == "pin.chessboard.building-upserted.v2"
    assert v2.schema_path(BUILDING_UPSERTED) == v1.schema_path(BUILDING_UPSERTED)
    assert v2.schema_path(PROJECT_UPSERTED).parent == contract_v2.SCHEMAS


def test_the_tests_version_2_is_a_breaking_change_with_a_schema_its_builder_meets(monkeypatch):
    monkeypatch.setenv("CHESSBOARD_CONTRACT_BUILDERS", contract_v2.MODULE)
    v2 = contracts.registered((contract_v2.MODULE,))[2]
    v1_payload = exact_json.loads(exact_json.dumps(project_upserted(project_row(), HANDBOOK)))
    v2_payload = v2.build(PROJECT_UPSERTED, v1_payload)
    topic = v2.topic(PROJECT_UPSERTED)
    assert payload_errors(topic, v2_payload) == []
    assert payload_errors(topic, v1_payload) != []  # version 1's payload is not version 2's
    changes = breaking_changes(
        contracts.schema_of("pin.chessboard.project-upserted.v1"), contracts.schema_of(topic)
    )
    assert "$.price: property removed" in changes and "$.currencyId: property removed" in changes

"""A contract version 2 the tests define: a breaking change of project-upserted (`price` becomes
`priceRange` with the bounds as decimal strings, `currencyId` goes), every other event type on
`.v2` as it is on `.v1`.

`CHESSBOARD_CONTRACT_BUILDERS=tests.support.contract_v2` makes it known to events/contracts.py in
the test's process and in every process it starts with its environment (a command, a Dagster run),
as a deployment's own module would be (docs/events.md#shipping-a-breaking-change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pin_chessboard_pipelines.events.contracts import Contract
from pin_chessboard_pipelines.events.payloads import PROJECT_UPSERTED

MODULE = __name__
SCHEMAS = Path(__file__).parent / "contract_v2_schemas"


def project_upserted_v2(v1: dict[str, Any]) -> dict[str, Any]:
    payload = {k: v for k, v in v1.items() if k not in ("price", "currencyId")}
    price = v1["price"]
    payload["priceRange"] = None if price is None else {"min": str(price["min"]), "max": str(price["max"])}
    return payload


CONTRACTS = [Contract(2, {PROJECT_UPSERTED: project_upserted_v2}, SCHEMAS)]

"""The contract versions the chessboard publishes, and their payload builders and JSON Schemas.

Every event type has a version 1: the payload builders of events/payloads.py, the schemas of
events/schemas/<topic>.json. A breaking change (docs/events.md#shipping-a-breaking-change) is a
`Contract` of the next version: one builder per event type it changes, from that event's version 1
payload to its own, and one schema per changed topic. An event type it does not change keeps its
version 1 payload and schema on the new version's topic, so a consumer moves all its topics at once.

`CHESSBOARD_CONTRACT_VERSIONS` (settings.py) names the versions published: each event is written to
the outbox once per version, in the same transaction, on `<event type>.v<version>`, with its own
messageId and contractVersion header (events/outbox.py). `CHESSBOARD_CONTRACT_BUILDERS` names the
modules that define the other versions (a module-level `CONTRACTS` list); they are imported when
the versions are first asked for, in whatever process writes events.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.events.payloads import EVENT_TYPES, topic_of
from pin_chessboard_pipelines.settings import (
    CONTRACT_BUILDERS_VARIABLE,
    CONTRACT_VERSIONS_VARIABLE,
    parse_contract_builders,
    parse_contract_versions,
)

SCHEMA_DIR = Path(__file__).resolve().parent / "schemas"
# The same schemas in the form the Tansu broker validates against (`--schema-registry`,
# runtime/embedded.py): <topic>.json, the payload under "value", every $ref written out.
BROKER_SCHEMA_DIR = SCHEMA_DIR / "broker"
EVENT_HEADERS_SCHEMA = "event.headers.json"
DEAD_LETTER_HEADERS_SCHEMA = "dead-letter.headers.json"

# the version 1 payload of an event -> the payload of another version
Builder = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Contract:
    version: int
    # event type -> builder; an event type not named keeps its version 1 payload
    builders: Mapping[str, Builder] = field(default_factory=dict)
    # where this version's <topic>.json live; an event type it does not change keeps version 1's
    schema_dir: Path = SCHEMA_DIR

    def topic(self, event_type: str) -> str:
        return topic_of(event_type, self.version)

    def build(self, event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        builder = self.builders.get(event_type)
        return payload if builder is None else builder(payload)

    def schema_path(self, event_type: str) -> Path:
        own = self.schema_dir / f"{self.topic(event_type)}.json"
        if self.version == 1 or event_type in self.builders:
            return own
        return SCHEMA_DIR / f"{event_type}.v1.json"


V1 = Contract(1)
_BUILT_IN: dict[int, Contract] = {1: V1}


@cache
def registered(builders: tuple[str, ...] = ()) -> dict[int, Contract]:
    """Version -> contract: the built-in version 1 and those of the `builders` modules."""
    known = dict(_BUILT_IN)
    for name in builders:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(
                f"{CONTRACT_BUILDERS_VARIABLE}={','.join(builders)!r} is invalid: cannot import {name} ({error})"
            ) from None
        for contract in getattr(module, "CONTRACTS", ()):
            unknown = sorted(set(contract.builders) - set(EVENT_TYPES))
            if unknown:
                raise ConfigError(
                    f"{name}: contract version {contract.version} names unknown event types {unknown}"
                )
            known[contract.version] = contract
    return known


@cache
def _published(versions_raw: str | None, builders_raw: str | None) -> tuple[Contract, ...]:
    env = {
        k: v
        for k, v in ((CONTRACT_VERSIONS_VARIABLE, versions_raw), (CONTRACT_BUILDERS_VARIABLE, builders_raw))
        if v is not None
    }
    versions = parse_contract_versions(env)
    known = registered(parse_contract_builders(env))
    missing = [v for v in versions if v not in known]
    if missing:
        raise ConfigError(
            f"{CONTRACT_VERSIONS_VARIABLE}={versions_raw!r} is invalid: no payload builder for contract "
            f"version {', '.join(map(str, missing))} (known: {', '.join(map(str, sorted(known)))})"
        )
    return tuple(known[v] for v in versions)


def published(env: Mapping[str, str] | None = None) -> tuple[Contract, ...]:
    """The contracts CHESSBOARD_CONTRACT_VERSIONS publishes, in its order; ConfigError (one line,
    exit 2) for a version no builder module defines. Cached per value of the two variables: a
    writer asks once per outbox write."""
    env = os.environ if env is None else env
    return _published(env.get(CONTRACT_VERSIONS_VARIABLE), env.get(CONTRACT_BUILDERS_VARIABLE))


def schema_of(topic: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON Schema of a pin.chessboard.* topic of any registered version."""
    event_type, _, suffix = topic.rpartition(".v")
    env = os.environ if env is None else env
    known = registered(parse_contract_builders(env))
    if event_type not in EVENT_TYPES or not suffix.isdigit() or int(suffix) not in known:
        raise KeyError(f"no schema for topic {topic}")
    return load_schema(known[int(suffix)].schema_path(event_type))


def load_schema(path: Path | str) -> dict[str, Any]:
    path = Path(path)
    if not path.is_absolute():
        path = SCHEMA_DIR / path
    return json.loads(path.read_text(encoding="utf-8"))


def v1_schema_files() -> dict[str, Path]:
    """topic -> its schema file, for the eight version 1 topics."""
    return {topic_of(event_type): SCHEMA_DIR / f"{topic_of(event_type)}.json" for event_type in EVENT_TYPES}


def broker_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A payload schema as Tansu reads a topic's: an object whose "value" property is the message
    value's schema. Tansu compiles that property on its own, so a `$ref` to the document's `$defs`
    would resolve to nothing and let every value through: each is written out in place. The key
    is left out (Tansu parses a key as JSON; ours is a bare UUID)."""
    defs = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            target = inline(defs[node["$ref"].removeprefix("#/$defs/")])
            return {**target, **{k: inline(v) for k, v in node.items() if k != "$ref"}}
        return {k: inline(v) for k, v in node.items() if k != "$defs"}

    value = inline({k: v for k, v in schema.items() if k not in ("$schema", "$id", "title", "$defs")})
    return {
        "$schema": schema["$schema"],
        "title": schema.get("title", ""),
        "type": "object",
        "properties": {"value": value},
        "required": ["value"],
    }


def broker_schemas(contracts: tuple[Contract, ...] = (V1,)) -> dict[str, str]:
    """file name -> text of the broker's schema of every topic of `contracts`."""
    return {
        f"{contract.topic(event_type)}.json": json.dumps(
            broker_schema(load_schema(contract.schema_path(event_type))), indent=2, ensure_ascii=False
        )
        + "\n"
        for contract in contracts
        for event_type in EVENT_TYPES
    }


def write_broker_schemas(
    directory: Path = BROKER_SCHEMA_DIR, contracts: tuple[Contract, ...] = (V1,)
) -> Path:
    """Writes broker_schemas into `directory` (BROKER_SCHEMA_DIR is kept in the repository: after a
    change of a schema, run `python -m pin_chessboard_pipelines.events.contracts`)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in broker_schemas(contracts).items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory


if __name__ == "__main__":
    print(write_broker_schemas())

"""The talent_developers partitions: one per Talent developer, listed from the API.

A key is the developer's name made URL- and shell-safe, then its Talent id
(`gk-alfa-1-2f6c…-…`), so the UI's partition lists read as developers while the id, the
DeveloperIdFilter of a run (docs/talent-initial-import.md#filters), is the key's last 36
characters. The key is frozen at first sight (`chessboard.developer_partitions`): a developer
Talent renames keeps its partition and its whole materialization history; its current name is in
the materializations' metadata. Keys of older deployments (the bare id, or an earlier name's) are
adopted as the frozen key when the table first sees their developer.
"""

import re
import unicodedata
from collections.abc import Iterable, Sequence

import dagster as dg
from sqlalchemy.engine import Engine

from pin_chessboard_pipelines.defs.talent_import.config import PARTITIONS
from pin_chessboard_pipelines.settings import Settings
from pin_chessboard_pipelines.store.queries import queries
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource, api_client_options

NAME_CHARS = 40  # of the name in a key; the id follows in full
_UUID_TAIL = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")
_CYRILLIC = {
    letter: "" if latin == "'" else latin
    for letter, latin in zip(
        "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
        [
            "a",
            "b",
            "v",
            "g",
            "d",
            "e",
            "e",
            "zh",
            "z",
            "i",
            "y",
            "k",
            "l",
            "m",
            "n",
            "o",
            "p",
            "r",
            "s",
            "t",
            "u",
            "f",
            "kh",
            "ts",
            "ch",
            "sh",
            "shch",
            "'",
            "y",
            "'",
            "e",
            "yu",
            "ya",
        ],
        strict=True,
    )
}


def slug(name: str) -> str:
    """`ГК Альфа 1` -> `gk-alfa-1`: Cyrillic transliterated, other letters stripped of accents,
    anything else a single hyphen."""
    text = "".join(_CYRILLIC.get(c, c) for c in name.lower())
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:NAME_CHARS].strip("-")


def partition_key(developer_id: str, name: str) -> str:
    """The partition of a developer: `<slug of the name>-<Talent id>` (the id alone without a name)."""
    prefix = slug(name)
    return f"{prefix}-{developer_id}" if prefix else developer_id


def developer_id_of(key: str) -> str:
    """The Talent developer id of a partition key."""
    found = _UUID_TAIL.search(key)
    return found.group(1) if found else key


def list_talent_developers(settings: Settings, project_id: str | None = None) -> list[tuple[str, str]]:
    """(Talent id, name) of the developers the API lists (all, or the developer of one project)."""
    source = ApiPullSource(
        settings.talent_api_url, settings.talent_api_token, client_options=api_client_options(settings)
    )
    try:
        return source.developers(project_id)
    finally:
        source.close()


def first_sight_key(developer_id: str, name: str, known: Iterable[str]) -> str:
    """The key a developer's partition is frozen with when first seen: a partition it already has
    (an older deployment's key), else `partition_key` of its current name."""
    wanted = developer_id.lower()
    existing = [key for key in known if developer_id_of(key).lower() == wanted]
    return existing[0] if existing else partition_key(developer_id, name)


def frozen_partition_keys(
    engine: Engine, developers: Sequence[tuple[str, str]], known: Sequence[str]
) -> dict[str, str]:
    """Talent id (lower case) -> the developer's partition key, frozen at first sight; the listed
    names are stored as the developers' current ones (one statement each way, in one transaction)."""
    latest = {developer_id.lower(): name for developer_id, name in developers}
    ids = list(latest)
    statements = queries("talent_import")
    with engine.begin() as conn:
        conn.execute(
            statements["freeze_developer_partitions"],
            {
                "developer_ids": ids,
                "keys": [first_sight_key(d, latest[d], known) for d in ids],
                "names": [latest[d] for d in ids],
            },
        )
        rows = conn.execute(statements["developer_partition_keys"], {"developer_ids": ids}).all()
    return {str(developer_id).lower(): key for developer_id, key in rows}


def new_developer_partitions(
    instance: dg.DagsterInstance, engine: Engine, developers: list[tuple[str, str]]
) -> list[str]:
    """Keys of the listed developers that are not partitions yet (a renamed developer keeps its own)."""
    known = instance.get_dynamic_partitions(PARTITIONS)
    keys = frozen_partition_keys(engine, developers, known).values()
    return [key for key in dict.fromkeys(keys) if key not in set(known)]


def add_developer_partitions(
    instance: dg.DagsterInstance, engine: Engine, developers: list[tuple[str, str]]
) -> list[str]:
    """Adds the partitions that are missing; returns them."""
    new = new_developer_partitions(instance, engine, developers)
    if new:
        try:
            instance.add_dynamic_partitions(PARTITIONS, new)
        except Exception:  # noqa: BLE001 - Dagster raises no type of its own for a duplicate
            # another process (a second import, the discovery sensor) added some of them first:
            # what matters is that they exist afterwards
            if new_developer_partitions(instance, engine, developers):
                raise
    return new

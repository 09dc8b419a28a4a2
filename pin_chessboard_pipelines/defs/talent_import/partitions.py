"""The talent_developers partitions: one per Talent developer, listed from the API.

A key is the developer's name made URL- and shell-safe, then its Talent id
(`gk-alfa-1-2f6c…-…`), so the UI's partition lists read as developers while the id, the
DeveloperIdFilter of a run (docs/talent-initial-import.md#filters), is the key's last 36
characters. Keys of older deployments (the bare id) still resolve.
"""

import re
import unicodedata

import dagster as dg

from pin_chessboard_pipelines.defs.talent_import.config import PARTITIONS
from pin_chessboard_pipelines.settings import Settings
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


def new_developer_partitions(instance: dg.DagsterInstance, developers: list[tuple[str, str]]) -> list[str]:
    """Keys of the listed developers that are not partitions yet (a renamed developer gets a new one)."""
    known = set(instance.get_dynamic_partitions(PARTITIONS))
    keys = [partition_key(developer_id, name) for developer_id, name in developers]
    return [key for key in dict.fromkeys(keys) if key not in known]


def add_developer_partitions(instance: dg.DagsterInstance, developers: list[tuple[str, str]]) -> list[str]:
    """Adds the partitions that are missing; returns them."""
    new = new_developer_partitions(instance, developers)
    if new:
        try:
            instance.add_dynamic_partitions(PARTITIONS, new)
        except Exception:
            # another process (a second import, the discovery sensor) added some of them first:
            # what matters is that they exist afterwards
            if new_developer_partitions(instance, developers):
                raise
    return new

"""Contract versions as configuration (chessboard-store.md "Contract versions (v1.3)"): with
CHESSBOARD_CONTRACT_VERSIONS=1,2 every event is published on `.v1` and `.v2` (the tests' version 2,
tests/support/contract_v2.py), in the same transaction, each topic seeing the same keys, versions
and order; with 2 alone `.v1` gets nothing new; a version without builders stops a command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy as sa

from pin_chessboard_pipelines.events.fast_path import relay_pending
from pin_chessboard_pipelines.events.payloads import EVENT_TYPES, PROJECT_UPSERTED, topic_of
from pin_chessboard_pipelines.events.reference_consumer import read_events
from pin_chessboard_pipelines.handbook_sync import HandbookSync
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.handbook import (
    ensure_handbook_topics,
    publish_handbook,
    rename_region,
)
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportOptions, ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource
from tests.support import contract_v2
from tests.support.contracts import assert_outbox_valid

pytestmark = [pytest.mark.slow, pytest.mark.kafka]

ROOT = Path(__file__).resolve().parents[2]
SPEC = DatasetSpec(developers=1, projects_per_developer=3, objects_per_project=8)


@pytest.fixture
def builders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHESSBOARD_CONTRACT_BUILDERS", contract_v2.MODULE)


def versions(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CHESSBOARD_CONTRACT_VERSIONS", value)


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A command in its own process, with the test's environment (the builders module included)."""
    return subprocess.run(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        check=False,
    )


def import_dataset(db_url: str, sim) -> None:
    result = ImportSession(
        db_url,
        build_request(page_size=10),
        ApiPullSource(sim.url),
        options=ImportOptions(lock_timeout_seconds=5, retry_seconds=0.05),
    ).run_here()
    assert result.status == "Completed", result


def make_recalc_due(engine) -> int:
    with engine.begin() as conn:
        return conn.execute(sa.text("UPDATE chessboard.project_recalc_requests SET due_at = now()")).rowcount


def rename_a_region(engine, broker) -> int:
    """Renames the region of the imported projects through handbook-sync; returns its id."""
    with engine.connect() as conn:
        region = conn.execute(
            sa.text("SELECT region_id FROM chessboard.projects WHERE region_id IS NOT NULL LIMIT 1")
        ).scalar_one()
    ensure_handbook_topics(broker)
    publish_handbook(broker)
    rename_region(broker, region, "Переименованный регион", version=2)
    result = HandbookSync(engine, broker, poll_timeout=0.1).run(until_idle=True, max_seconds=60)
    assert result.renamed == 1 and result.republished >= 1
    return region


def outbox_topics(engine) -> dict[str, int]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT topic, count(*) FROM chessboard.outbox_messages GROUP BY topic"))
        return {topic: n for topic, n in rows}


def by_key(events) -> dict[str, list[int]]:
    """key -> the versions its events carry, in the order the topic holds them."""
    seen: dict[str, list[int]] = defaultdict(list)
    for event in events:
        seen[event.key].append(event.version)
    return dict(seen)


def test_dual_publish_puts_every_change_on_both_versions_in_the_same_order(
    builders, monkeypatch, db_url, engine, cli_env, broker, talent_sim
):
    versions(monkeypatch, "1,2")
    import_dataset(db_url, talent_sim(SPEC))
    # the recalc of the imported projects, in a command's own process (a Dagster run of the recalc
    # job): it sees the tests' builders through CHESSBOARD_CONTRACT_BUILDERS
    assert make_recalc_due(engine) == 3
    drained = run_cli("recalc", "drain", env={"KAFKA_BOOTSTRAP_SERVERS": broker})
    assert drained.returncode == 0, drained.stderr[-2000:]
    rename_a_region(engine, broker)
    relay_pending(engine, broker, until_empty=True)

    topics = outbox_topics(engine)
    for event_type in EVENT_TYPES:  # one row per version of every event
        assert topics.get(topic_of(event_type, 1)) == topics.get(topic_of(event_type, 2)), event_type
    projects_v1 = read_events(broker, [topic_of(PROJECT_UPSERTED, 1)])
    # created, recalculated (price and counters), republished by the rename
    assert {len(v) for v in by_key(projects_v1).values()} >= {3}
    for event_type in EVENT_TYPES:
        v1 = read_events(broker, [topic_of(event_type, 1)])
        v2 = read_events(broker, [topic_of(event_type, 2)])
        assert v1, event_type
        assert by_key(v1) == by_key(v2), event_type  # same keys, versions, per-key order
        assert {e.headers["contractVersion"] for e in v1} == {"1"}
        assert {e.headers["contractVersion"] for e in v2} == {"2"}
        assert not {e.message_id for e in v1} & {e.message_id for e in v2}  # each its own messageId
    # the version 2 payload is the builder's; the others are version 1's
    project_v2 = read_events(broker, [topic_of(PROJECT_UPSERTED, 2)])
    assert all("priceRange" in e.payload and "price" not in e.payload for e in project_v2)
    assert any(e.payload["priceRange"] is not None for e in project_v2)  # the recalc filled it
    assert all("price" in e.payload and "priceRange" not in e.payload for e in projects_v1)
    assert assert_outbox_valid(db_url) == sum(topics.values())  # both versions meet their schemas


def test_with_version_2_alone_v1_gets_nothing_new(builders, monkeypatch, db_url, engine, broker, talent_sim):
    import_dataset(db_url, talent_sim(SPEC))  # the default: version 1 only
    before = outbox_topics(engine)
    assert before and all(topic.endswith(".v1") for topic in before)

    versions(monkeypatch, "2")
    rename_a_region(engine, broker)
    after = outbox_topics(engine)
    assert {t: n for t, n in after.items() if t.endswith(".v1")} == before
    assert set(after) - set(before) == {topic_of(PROJECT_UPSERTED, 2)}
    assert_outbox_valid(db_url)


NO_BUILDER = (
    "CHESSBOARD_CONTRACT_VERSIONS='3' is invalid: no payload builder for contract version 3 (known: 1)"
)


@pytest.mark.parametrize(
    ("env", "args", "line"),
    [
        ({"CHESSBOARD_CONTRACT_VERSIONS": "3"}, ["db", "upgrade"], NO_BUILDER),
        ({"CHESSBOARD_CONTRACT_VERSIONS": "3"}, ["outbox", "relay"], NO_BUILDER),
        ({"CHESSBOARD_CONTRACT_VERSIONS": "3"}, ["recalc", "status"], NO_BUILDER),
        (
            {"CHESSBOARD_CONTRACT_VERSIONS": "1,3", "CHESSBOARD_CONTRACT_BUILDERS": contract_v2.MODULE},
            ["outbox", "relay"],
            "CHESSBOARD_CONTRACT_VERSIONS='1,3' is invalid: no payload builder for contract version 3 (known: 1, 2)",
        ),
        (
            {"CHESSBOARD_CONTRACT_VERSIONS": "1,x"},
            ["outbox", "relay"],
            "CHESSBOARD_CONTRACT_VERSIONS='1,x' is invalid: expected distinct versions >= 1 separated by commas, e.g. 1,2",
        ),
        (
            {"CHESSBOARD_CONTRACT_BUILDERS": "no_such.module"},
            ["outbox", "relay"],
            "CHESSBOARD_CONTRACT_BUILDERS='no_such.module' is invalid: cannot import no_such.module",
        ),
    ],
)
def test_a_version_without_builders_stops_a_command_with_one_line_and_exit_2(db_url, env, args, line):
    result = run_cli(*args, env={"CHESSBOARD_DATABASE_URL": db_url, **env})
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), result.stderr

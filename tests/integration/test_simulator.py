"""The Talent simulator over real sockets: HTTP API, CLI, and publishing to the broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition

from pin_chessboard_pipelines.entities import COLLECTIONS, ENTITIES
from pin_chessboard_pipelines.runtime.embedded import free_port
from pin_chessboard_pipelines.talent.simulator import dataset as ds
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent.simulator.publish import publish_dataset

ROOT = Path(__file__).resolve().parents[2]
SPEC = DatasetSpec(developers=2, projects_per_developer=2, buildings_per_project=2, objects_per_project=30)


@pytest.fixture
def http():
    with requests.Session() as session:
        yield session


def walk(http, url: str, collection: str, limit: int, **params: str) -> list[dict]:
    items, cursor = [], None
    while True:
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        response = http.get(f"{url}/api/v1/{collection}", params=query)
        assert response.status_code == 200, response.text
        body = response.json()
        items.extend(body["items"])
        cursor = body["nextCursor"]
        if cursor is None:
            return items


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_paging_over_http_reaches_the_end(talent_sim, http, collection):
    server = talent_sim(SPEC)
    assert walk(http, server.url, collection, 7) == list(ds.iter_items(SPEC, collection))


def test_filters_over_http(talent_sim, http):
    server = talent_sim(SPEC)
    developer, project = ds.entity_id(SPEC, "developers", 1), ds.entity_id(SPEC, "projects", 1)
    assert walk(http, server.url, "projects", 10, developerId=developer) == list(
        ds.iter_items(SPEC, "projects", developer_id=developer)
    )
    objects = walk(http, server.url, "property-objects", 8, projectId=project)
    assert len(objects) == SPEC.objects_per_project
    assert objects == list(ds.iter_items(SPEC, "property-objects", project_id=project))
    assert walk(http, server.url, "developers", 10, projectId=project) == [ds.item(SPEC, "developers", 0)]


def test_by_ids_and_its_limit(talent_sim, http):
    server = talent_sim(SPEC)
    ids = [ds.entity_id(SPEC, "property-objects", i) for i in (3, 99, 1)] + ["not-an-id"]
    response = http.get(f"{server.url}/api/v1/property-objects/by-ids", params={"ids": ",".join(ids)})
    assert response.status_code == 200
    assert [i["id"] for i in response.json()["items"]] == ids[:3]
    too_many = ",".join(ds.entity_id(SPEC, "property-objects", i % 120) for i in range(501))
    assert (
        http.get(f"{server.url}/api/v1/property-objects/by-ids", params={"ids": too_many}).status_code == 400
    )


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        ("/api/v1/projects", {"limit": "0"}, 400),
        ("/api/v1/projects", {"limit": "2001"}, 400),
        ("/api/v1/projects", {"limit": "ten"}, 400),
        ("/api/v1/projects", {}, 400),
        ("/api/v1/projects", {"limit": "5", "cursor": "garbage!"}, 400),
        ("/api/v1/projects", {"limit": "5", "developerId": "x", "projectId": "y"}, 400),
        ("/api/v1/flats", {"limit": "5"}, 404),
        ("/api/v2/projects", {"limit": "5"}, 404),
        ("/api/v1/projects", {"limit": "2000"}, 200),
    ],
)
def test_invalid_requests_are_client_errors(talent_sim, http, path, params, status):
    server = talent_sim(SPEC)
    response = http.get(f"{server.url}{path}", params=params)
    assert response.status_code == status
    assert "error" in response.json() or status == 200


def test_bearer_token_is_required_when_configured(talent_sim, http):
    server = talent_sim(SPEC, token="s3cret")
    url = f"{server.url}/api/v1/developers?limit=5"
    assert http.get(url).status_code == 401
    assert http.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert http.get(url, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    assert http.get(f"{server.url}/health").json() == {"status": "ok"}


def test_a_503_fault_fires_its_times_then_the_page_succeeds(talent_sim, http):
    spec = DatasetSpec(faults=(("property-objects", 1, "503", 2),))
    server = talent_sim(spec)
    first = http.get(f"{server.url}/api/v1/property-objects", params={"limit": 4}).json()
    page_1 = {"limit": 4, "cursor": first["nextCursor"]}
    for _ in range(2):
        response = http.get(f"{server.url}/api/v1/property-objects", params=page_1)
        assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    response = http.get(f"{server.url}/api/v1/property-objects", params=page_1)
    assert response.status_code == 200
    assert response.json()["items"] == ds.list_page(spec, "property-objects", first["nextCursor"], 4)[0]
    assert server.page_hits("property-objects", 1) == 3


def test_a_malformed_fault_answers_a_truncated_body(talent_sim, http):
    server = talent_sim(DatasetSpec(faults=(("projects", 0, "malformed", 1),)))
    response = http.get(f"{server.url}/api/v1/projects", params={"limit": 10})
    assert response.status_code == 200
    with pytest.raises(ValueError):
        json.loads(response.content)
    assert http.get(f"{server.url}/api/v1/projects", params={"limit": 10}).json()["items"]


def test_set_spec_serves_a_newer_generation_and_unavailable_answers_503(talent_sim, http):
    server = talent_sim(SPEC)
    server.set_spec(DatasetSpec(**{**SPEC.__dict__, "version": 3}))
    newer = http.get(f"{server.url}/api/v1/developers", params={"limit": 1}).json()["items"][0]
    assert newer["version"] == ds.item(SPEC, "developers", 0)["version"] + 2
    server.available = False
    assert http.get(f"{server.url}/health").status_code == 503


def test_latency_knob_delays_each_request(talent_sim, http):
    server = talent_sim(DatasetSpec(latency_ms=150))
    started = time.monotonic()
    http.get(f"{server.url}/health")
    assert time.monotonic() - started >= 0.15


def test_a_2000_item_page_of_the_1m_dataset_is_served(talent_sim, http):
    """How fast: benchmarks/sim_memory.py prints the objects/s of 2000-item pages."""
    server = talent_sim(DatasetSpec.preset("1m"))
    body = http.get(f"{server.url}/api/v1/property-objects", params={"limit": 2000}).json()
    assert len(body["items"]) == 2000


# --- CLI ------------------------------------------------------------------------------------------

CLI = [sys.executable, "-m", "pin_chessboard_pipelines.cli", "talent-sim"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def test_cli_serve_answers_then_stops_on_sigterm(http):
    port = free_port()
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", str(port), "--dataset", "demo", "--set", "poison_every=10"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(TALENT_API_TOKEN="tok"),
        cwd=ROOT,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"talent-sim serving http://127.0.0.1:{port} dataset=demo")
        assert "tok" not in line
        url = f"http://127.0.0.1:{port}"
        assert http.get(f"{url}/health").status_code == 200
        assert http.get(f"{url}/api/v1/projects", params={"limit": 5}).status_code == 401
        answer = http.get(
            f"{url}/api/v1/projects", params={"limit": 5}, headers={"Authorization": "Bearer tok"}
        )
        assert len(answer.json()["items"]) == 5
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize(
    "arguments",
    [
        ["serve", "--set", "poison_every=lots"],
        ["serve", "--set", "colour=red"],
        ["serve", "--dataset", "huge"],
        ["serve", "--port", "x"],
        ["publish", "--set", "faults=projects:0:500"],
    ],
)
def test_cli_invalid_arguments_exit_2_with_one_line(arguments):
    done = subprocess.run(
        [*CLI, *arguments], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert done.stdout == ""


# --- publish --------------------------------------------------------------------------------------


def consume_own(
    bootstrap: str, spec: DatasetSpec, expected: int, timeout: float = 20
) -> list[tuple[str, str, bytes | None]]:
    """(topic, key, value) of the messages of `spec` on the Talent topics, read from the beginning.

    The broker is shared by the session, so messages of other datasets (other seeds) are left out.
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-simulator-{spec.seed}",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    try:
        metadata = consumer.list_topics(timeout=10)
        consumer.assign(
            [
                TopicPartition(s.topic, p, 0)  # offset 0: from the beginning
                for s in ENTITIES
                for p in metadata.topics[s.topic].partitions
            ]
        )
        messages = []
        deadline = time.monotonic() + timeout
        while len(messages) < expected and time.monotonic() < deadline:
            for message in consumer.consume(500, timeout=0.5):
                if message.error() is None and ds.decode_id(spec, message.key().decode()) is not None:
                    messages.append((message.topic(), message.key().decode(), message.value()))
        return messages
    finally:
        consumer.close()


@pytest.mark.kafka
def test_publish_writes_every_entity_keyed_by_id_with_tombstones(kafka_bootstrap):
    spec = DatasetSpec(seed=int.from_bytes(os.urandom(4), "big"))  # keys of this test only
    objects = ds.count(spec, "property-objects")
    counts = publish_dataset(spec, kafka_bootstrap, tombstone_every=objects)  # exactly one tombstone
    assert counts == {s.topic: ds.count(spec, s.collection) for s in ENTITIES}
    messages = consume_own(kafka_bootstrap, spec, sum(counts.values()))
    assert Counter(topic for topic, _, _ in messages) == counts
    expected = {
        ds.entity_id(spec, s.collection, i): s.topic for s in ENTITIES for i in range(counts[s.topic])
    }
    assert {key: topic for topic, key, _ in messages} == expected
    tombstones = [key for _, key, value in messages if value is None]
    assert tombstones == [ds.entity_id(spec, "property-objects", objects - 1)]
    for topic, key, value in messages:
        if value is not None:
            snapshot = json.loads(value.decode())
            assert snapshot["id"] == key
            assert snapshot == ds.item(spec, *ds.decode_id(spec, key))
            assert topic == expected[key]

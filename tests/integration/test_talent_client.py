"""The Talent API client against the simulator: paging, filters, by-ids, retries and their limits."""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from decimal import Decimal

import pytest

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.errors import (
    TalentCancelled,
    TalentPermanentError,
    TalentSourceUnavailable,
    TalentTransientError,
)
from pin_chessboard_pipelines.talent.client import MAX_BY_IDS, TalentApiClient, TalentPage
from pin_chessboard_pipelines.talent.simulator import dataset as ds
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec

SPEC = DatasetSpec(developers=2, projects_per_developer=3, buildings_per_project=2, objects_per_project=250)
TOKEN = "t0k3n-never-printed"


@pytest.fixture
def make_client():
    """Clients whose waits are recorded instead of slept."""
    clients: list[TalentApiClient] = []

    def make(url: str, **options) -> tuple[TalentApiClient, list[float]]:
        waits: list[float] = []
        client = TalentApiClient(url, sleep=waits.append, rng=random.Random(1), **options)
        clients.append(client)
        return client, waits

    yield make
    for client in clients:
        client.close()


def walk(client: TalentApiClient, collection: str, limit: int, **filters: str) -> list[dict]:
    items, cursor = [], None
    while True:
        page = client.list_page(collection, cursor, limit, **filters)
        assert isinstance(page, TalentPage)
        items.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return items


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_walks_every_collection_to_the_end(talent_sim, make_client, collection):
    client, waits = make_client(talent_sim(SPEC).url)
    # the client reads JSON numbers with a fraction as Decimal (exact prices and areas)
    expected = json.loads(json.dumps(list(ds.iter_items(SPEC, collection))), parse_float=Decimal)
    assert walk(client, collection, 97) == expected
    assert waits == []


def test_filters_are_passed_to_the_source(talent_sim, make_client):
    client, _ = make_client(talent_sim(SPEC).url)
    developer, project = ds.entity_id(SPEC, "developers", 1), ds.entity_id(SPEC, "projects", 4)
    assert walk(client, "property-objects", 200, developer_id=developer) == list(
        ds.iter_items(SPEC, "property-objects", developer_id=developer)
    )
    assert walk(client, "buildings", 1, project_id=project) == list(
        ds.iter_items(SPEC, "buildings", project_id=project)
    )
    with pytest.raises(ValueError):
        client.list_page("projects", None, 10, developer_id=developer, project_id=project)
    with pytest.raises(ValueError):
        client.list_page("projects", None, 2001)


def test_by_ids_asks_in_batches_of_500(talent_sim, make_client):
    server = talent_sim(SPEC)
    client, _ = make_client(server.url)
    ids = [ds.entity_id(SPEC, "property-objects", i) for i in range(1200)] + [
        "00000000-0000-4000-8000-000000000000"
    ]
    calls = []
    original = client._session.get

    def counting_get(url, **kwargs):
        calls.append(len(kwargs["params"]["ids"].split(",")))
        return original(url, **kwargs)

    client._session.get = counting_get
    assert [i["id"] for i in client.by_ids(ids)] == ids[:1200]
    assert calls == [MAX_BY_IDS, MAX_BY_IDS, 201]
    assert client.by_ids([]) == []


def test_retries_a_503_honouring_retry_after(talent_sim, make_client):
    server = talent_sim(DatasetSpec(faults=(("property-objects", 1, "503", 2),)))
    client, waits = make_client(server.url, token=TOKEN)
    assert walk(client, "property-objects", 4) == list(ds.iter_items(server.spec, "property-objects"))
    assert server.page_hits("property-objects", 1) == 3
    assert waits == [1.0, 1.0]


def test_retries_429_and_caps_retry_after_by_backoff_max(talent_sim, make_client):
    server = talent_sim(DatasetSpec(faults=(("projects", 0, "429", 3),)))
    client, waits = make_client(server.url, backoff_max=0.25)
    assert len(client.list_page("projects", None, 10).items) == 2
    assert waits == [0.25, 0.25, 0.25]
    assert server.page_hits("projects", 0) == 4


def test_recovers_from_a_malformed_body_with_jittered_backoff(talent_sim, make_client):
    server = talent_sim(DatasetSpec(faults=(("layouts", 0, "malformed", 2),)))
    client, waits = make_client(server.url, backoff_base=0.2)
    assert client.list_page("layouts", None, 10).items == list(ds.iter_items(server.spec, "layouts"))
    assert len(waits) == 2
    assert 0.1 <= waits[0] <= 0.2 and 0.2 <= waits[1] <= 0.4  # half the exponential ceiling plus jitter


def test_gives_up_after_max_attempts(talent_sim, make_client):
    server = talent_sim(DatasetSpec(faults=(("developers", 0, "503", 10),)), token=TOKEN)
    client, waits = make_client(server.url, token=TOKEN, max_attempts=3)
    with pytest.raises(TalentTransientError) as error:
        client.list_page("developers", None, 10)
    assert error.value.attempts == 3 and error.value.status == 503
    assert str(error.value) == "GET /api/v1/developers answered 503 (3 attempts)"
    assert server.page_hits("developers", 0) == 3 and len(waits) == 2
    assert TOKEN not in str(error.value) and TOKEN not in repr(client)


def test_a_timeout_is_transient(talent_sim, make_client):
    server = talent_sim(DatasetSpec(latency_ms=400))
    client, waits = make_client(server.url, timeout=0.05, max_attempts=2)
    with pytest.raises(TalentTransientError, match=r"GET /api/v1/projects failed: timed out \(2 attempts\)"):
        client.list_page("projects", None, 10)
    assert len(waits) == 1


@pytest.mark.parametrize(
    ("suffix", "token", "status"),
    [("/elsewhere", TOKEN, 404), ("", None, 401), ("", "wrong", 401)],
)
def test_other_4xx_are_permanent_and_not_retried(talent_sim, make_client, suffix, token, status):
    server = talent_sim(SPEC, token=TOKEN)
    client, waits = make_client(server.url + suffix, token=token)
    with pytest.raises(TalentPermanentError) as error:
        client.list_page("projects", None, 10)
    assert error.value.status == status and waits == []
    assert TOKEN not in str(error.value)


def test_should_stop_cancels_the_wait_for_a_retry(talent_sim, make_client):
    server = talent_sim(DatasetSpec(faults=(("projects", 0, "503", 5),)))
    stop = []
    client, waits = make_client(server.url, should_stop=lambda: bool(stop))
    client._sleep = lambda seconds: (waits.append(seconds), stop.append(True))
    with pytest.raises(TalentCancelled):
        client.list_page("projects", None, 10)
    assert server.page_hits("projects", 0) == 1 and waits == [0.1]


def test_health(talent_sim, make_client):
    server = talent_sim(SPEC, token=TOKEN)
    client, _ = make_client(server.url, token=TOKEN)
    client.health()
    server.available = False
    with pytest.raises(TalentSourceUnavailable, match=r"^GET /health answered 503$"):
        client.health()
    server.stop()
    with pytest.raises(TalentSourceUnavailable, match=r"^GET /health failed: connection refused$") as error:
        client.health()
    assert TOKEN not in str(error.value)


class _Trickle(threading.Thread):
    """A Talent that answers 200 at once and then sends its body a byte every `pause` seconds."""

    def __init__(self, body: bytes, pause: float) -> None:
        super().__init__(daemon=True)
        self.body, self.pause = body, pause
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.done = threading.Event()
        self.sent: list[int] = []  # body bytes sent per connection

    def run(self) -> None:
        while not self.done.is_set():
            try:
                self.server.settimeout(0.2)
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(self.body)}\r\n\r\n"
                self.sent.append(0)
                try:
                    conn.sendall(head.encode())
                    for i in range(len(self.body)):
                        if self.done.is_set():
                            return
                        conn.sendall(self.body[i : i + 1])
                        self.sent[-1] += 1
                        time.sleep(self.pause)
                except OSError:
                    continue

    def stop(self) -> None:
        self.done.set()
        self.server.close()


def test_a_trickling_answer_fails_the_attempt_at_the_deadline(make_client):
    """Every byte comes well within the timeout, the whole answer never does: each attempt gives up
    at TALENT_API_TIMEOUT_SECONDS, with most of the body still unsent."""
    body = json.dumps({"items": [], "nextCursor": None}).encode() + b" " * 40
    trickle = _Trickle(body, pause=0.1)
    trickle.start()
    try:
        client, waits = make_client(trickle.url, timeout=0.5, max_attempts=2)
        with pytest.raises(TalentTransientError, match=r"timed out \(no complete answer within 0.5 s\)"):
            client.list_page("projects", None, 10)
    finally:
        trickle.stop()
    assert len(waits) == 1 and len(trickle.sent) == 2
    assert all(sent < len(body) // 2 for sent in trickle.sent), (trickle.sent, len(body))


def test_a_quick_trickle_within_the_deadline_is_read_whole(make_client):
    body = json.dumps({"items": [{"id": "x"}], "nextCursor": None}).encode()
    trickle = _Trickle(body, pause=0.001)
    trickle.start()
    try:
        client, _ = make_client(trickle.url, timeout=5)
        page = client.list_page("projects", None, 10)
    finally:
        trickle.stop()
    assert page.items == [{"id": "x"}] and page.next_cursor is None

"""The Talent HTTP API (docs/talent-source.md#http-api), served from a synthetic dataset.

Fault rules of the spec make a page answer 503 / 429 (with `Retry-After: 1`) or a truncated JSON
body a number of times before it succeeds, so clients' retries can be exercised for real.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pin_chessboard_pipelines.entities import COLLECTIONS
from pin_chessboard_pipelines.errors import DatasetError, SimulatorAnswer, UnknownCollection
from pin_chessboard_pipelines.talent.client import MAX_BY_IDS, MAX_PAGE_LIMIT
from pin_chessboard_pipelines.talent.simulator import dataset
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec, FaultRule

API_PREFIX = "/api/v1/"
BY_IDS_PATH = "property-objects/by-ids"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handler threads: a clean stop
    block_on_close = True

    def __init__(self, address: tuple[str, int], simulator: SimulatorServer) -> None:
        self.simulator = simulator
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def close_connections(self) -> None:
        """Wake handler threads idling on keep-alive connections so they can be joined."""
        with self.connections_lock:
            connections = list(self.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: clients reuse one connection
    timeout = 60  # idle keep-alive connections are dropped after this many seconds
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stall
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
        pass  # quiet: one line per request would drown a 1M-object walk

    def do_GET(self) -> None:
        sim = self.server.simulator
        spec = sim.spec
        if spec.latency_ms:
            time.sleep(spec.latency_ms / 1000)
        parts = urlsplit(self.path)
        try:
            if not sim.available:
                self._send_json(503, {"error": "unavailable"}, {"Retry-After": "1"})
            elif parts.path == "/health":
                self._send_json(200, {"status": "ok"})
            elif parts.path.startswith(API_PREFIX):
                if not sim.authorized(self.headers.get("Authorization")):
                    raise SimulatorAnswer(401, "missing or wrong bearer token")
                self._api(sim, spec, parts.path[len(API_PREFIX) :], _query(parts.query))
            else:
                raise SimulatorAnswer(404, f"no route {parts.path}")
        except SimulatorAnswer as e:
            self._send_json(e.status, {"error": str(e)})
        except DatasetError as e:
            self._send_json(404 if isinstance(e, UnknownCollection) else 400, {"error": str(e)})

    def _api(self, sim: SimulatorServer, spec: DatasetSpec, route: str, query: dict[str, str]) -> None:
        if route == BY_IDS_PATH:
            if "ids" not in query:
                raise SimulatorAnswer(400, "ids is required")
            ids = [i for i in query["ids"].split(",") if i]
            if len(ids) > MAX_BY_IDS:
                raise SimulatorAnswer(400, f"at most {MAX_BY_IDS} ids per request, got {len(ids)}")
            self._send_json(200, {"items": dataset.by_ids(spec, ids)})
            return
        if route not in COLLECTIONS:
            raise SimulatorAnswer(404, f"unknown collection {route!r}")
        try:
            limit = int(query["limit"])
        except (KeyError, ValueError):
            raise SimulatorAnswer(400, f"limit must be an integer 1..{MAX_PAGE_LIMIT}") from None
        if not 1 <= limit <= MAX_PAGE_LIMIT:
            raise SimulatorAnswer(400, f"limit must be an integer 1..{MAX_PAGE_LIMIT}")
        cursor, developer_id, project_id = (
            query.get("cursor"),
            query.get("developerId"),
            query.get("projectId"),
        )
        page_no = dataset.page_number(spec, route, cursor, limit, developer_id, project_id)
        fault = sim.take_fault(route, page_no)
        if fault in ("503", "429"):
            self._send_json(int(fault), {"error": "injected fault"}, {"Retry-After": "1"})
            return
        items, next_cursor = dataset.list_page(spec, route, cursor, limit, developer_id, project_id)
        body = _encode({"items": items, "nextCursor": next_cursor})
        if fault == "malformed":
            body = body[: len(body) // 2]
        self._send(200, body)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, _encode(payload), headers)

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _encode(payload: Any) -> bytes:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()


def _query(raw: str) -> dict[str, str]:
    query = {}
    for name, values in parse_qs(raw, keep_blank_values=True).items():
        if len(values) > 1:
            raise SimulatorAnswer(400, f"{name} is given more than once")
        query[name] = values[0]
    return query


class SimulatorServer:
    """The simulator on a real socket; port 0 picks a free port. Use as a context manager or start()/stop()."""

    def __init__(
        self, spec: DatasetSpec, host: str = "127.0.0.1", port: int = 0, token: str | None = None
    ) -> None:
        self._token = token.encode() if token else None
        self._lock = threading.Lock()
        self._faults: dict[tuple[str, int], list[list[Any]]] = {}
        self._hits: Counter[tuple[str, int]] = Counter()
        self.spec: DatasetSpec
        self.set_spec(spec)
        self.available = True  # False: every request, /health included, answers 503
        self._host = host
        self._httpd = _HTTPServer((host, port), self)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def set_spec(self, spec: DatasetSpec) -> None:
        """Serve another dataset (e.g. a newer generation); its fault rules start afresh."""
        faults: dict[tuple[str, int], list[list[Any]]] = {}
        for rule in spec.faults:
            faults.setdefault((rule.collection, rule.page_no), []).append([rule, rule.times])
        with self._lock:
            self.spec = spec
            self._faults = faults
            self._hits.clear()

    def authorized(self, header: str | None) -> bool:
        if self._token is None:
            return True
        return header is not None and hmac.compare_digest(header.encode(), b"Bearer " + self._token)

    def take_fault(self, collection: str, page_no: int) -> str | None:
        """Count a request of a page and consume one firing of its fault rule, if any is left."""
        with self._lock:
            self._hits[(collection, page_no)] += 1
            for slot in self._faults.get((collection, page_no), ()):
                if slot[1] > 0:
                    slot[1] -= 1
                    rule: FaultRule = slot[0]
                    return rule.kind
        return None

    def page_hits(self, collection: str, page_no: int) -> int:
        """How many listing requests page `page_no` of `collection` received (faulty ones included)."""
        with self._lock:
            return self._hits[(collection, page_no)]

    def start(self) -> SimulatorServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.1},
                name="talent-simulator",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.close_connections()
        self._httpd.server_close()

    def serve_forever(self, stop_signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> None:
        """Serve until one of `stop_signals` arrives (main thread only), then stop cleanly."""
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = {s: signal.signal(s, on_signal) for s in stop_signals}
        try:
            self.start()
            while not stop.wait(0.5):
                pass
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.stop()

    def __enter__(self) -> SimulatorServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

"""HTTP client of the Talent API (docs/talent-source.md#http-api).

429, 5xx, timeouts, connection errors and malformed bodies are transient: retried with exponential
backoff and jitter, honouring `Retry-After`; any other 4xx is permanent. Messages name the method
and path only, never the token. One client holds one keep-alive session: use one per thread.

`timeout` (TALENT_API_TIMEOUT_SECONDS) is a deadline for the whole answer of one attempt
(docs/talent-source.md#http-api): connecting and each wait for the status line are bounded by it,
and the body is read with the socket's timeout trimmed to what is left of it, so a source that
trickles its answer fails the attempt once the deadline passed instead of holding the page.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import requests
from urllib3 import exceptions as urllib3_exceptions

from pin_chessboard_pipelines.entities import BY_COLLECTION
from pin_chessboard_pipelines.errors import (
    TalentCancelled,
    TalentMalformedAnswer,
    TalentPermanentError,
    TalentSourceUnavailable,
    TalentTooSlow,
    TalentTransientError,
)
from pin_chessboard_pipelines.observability.logs import log_event

log = logging.getLogger(__name__)

MAX_PAGE_LIMIT = 2000  # `limit` of a listing: 1..2000
MAX_BY_IDS = 500  # ids per by-ids request

Item = dict[str, Any]


@dataclass(frozen=True)
class TalentPage:
    items: list[Item]
    next_cursor: str | None  # None = last page


class TalentApiClient:
    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30,
        max_attempts: int = 6,
        backoff_base: float = 0.2,
        backoff_max: float = 10,
        *,
        should_stop: Callable[[], bool] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.should_stop = should_stop
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._session = requests.Session()
        self._session.headers.update({"Accept": "application/json", "User-Agent": "pin-chessboard-pipelines"})
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"

    def __repr__(self) -> str:  # the token stays out of logs
        return f"TalentApiClient({self.base_url!r})"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> TalentApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def health(self) -> None:
        """One GET /health; raises TalentSourceUnavailable unless it answers 200."""
        try:
            # the status is the answer: the body is never waited for (stream)
            response = self._session.get(f"{self.base_url}/health", timeout=self.timeout, stream=True)
        except requests.Timeout:
            raise TalentSourceUnavailable("GET /health failed: timed out") from None
        except requests.RequestException as e:
            raise TalentSourceUnavailable(f"GET /health failed: {_describe(e)}") from None
        with response:
            if response.status_code != 200:
                raise TalentSourceUnavailable(f"GET /health answered {response.status_code}")

    def list_page(
        self,
        collection: str,
        cursor: str | None,
        limit: int,
        developer_id: str | None = None,
        project_id: str | None = None,
    ) -> TalentPage:
        """One page of a listing; cursor None = the first page."""
        if collection not in BY_COLLECTION:
            raise ValueError(f"unknown collection {collection!r}")
        if not 1 <= limit <= MAX_PAGE_LIMIT:
            raise ValueError(f"limit must be 1..{MAX_PAGE_LIMIT}, got {limit}")
        if developer_id and project_id:
            raise ValueError("developer_id and project_id are mutually exclusive")
        params = {"limit": str(limit)}
        for name, value in (("cursor", cursor), ("developerId", developer_id), ("projectId", project_id)):
            if value:
                params[name] = value
        payload = self._get(f"/api/v1/{collection}", params, listing=True)
        return TalentPage(payload["items"], payload["nextCursor"])

    def by_ids(self, ids: Iterable[str]) -> list[Item]:
        """The property objects among `ids` that exist, asked MAX_BY_IDS at a time."""
        ids = list(ids)
        items: list[Item] = []
        for start in range(0, len(ids), MAX_BY_IDS):
            batch = ",".join(ids[start : start + MAX_BY_IDS])
            items.extend(self._get("/api/v1/property-objects/by-ids", {"ids": batch}, listing=False)["items"])
        return items

    def _get(self, path: str, params: dict[str, str], *, listing: bool) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        for attempt in range(1, self.max_attempts + 1):
            self._check_stop()
            retry_after: float | None = None
            status: int | None = None
            timed_out = False
            deadline = time.monotonic() + self.timeout
            try:
                response = self._session.get(url, params=params, timeout=self.timeout, stream=True)
            except requests.Timeout:
                reason, timed_out = "failed: timed out", True
            except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError) as e:
                reason = f"failed: {_describe(e)}"
            else:
                with response:
                    status = response.status_code
                    if status == 200:
                        try:
                            return _payload(_read_within(response, deadline), listing)
                        except TalentMalformedAnswer:
                            reason = "answered a malformed body"
                        except TalentTooSlow:
                            reason = f"failed: timed out (no complete answer within {self.timeout:g} s)"
                            timed_out = True
                        except (requests.RequestException, urllib3_exceptions.HTTPError, OSError) as e:
                            reason = f"failed: {_describe(e)}"
                    elif status == 429 or status >= 500:
                        reason = f"answered {status}"
                        retry_after = _retry_after(response.headers.get("Retry-After"))
                    else:
                        raise TalentPermanentError(f"GET {path} answered {status}", status)
            if attempt == self.max_attempts:
                raise TalentTransientError(
                    f"GET {path} {reason} ({attempt} attempts)", status, attempt, timed_out=timed_out
                )
            delay = self._delay(attempt, retry_after)
            # every wait says what it waits for (no silent retries)
            log_event(
                log,
                logging.WARNING,
                "talent-request-retry",
                Request=f"GET {path}",
                Attempt=f"{attempt}/{self.max_attempts}",
                Reason=repr(reason),
                WaitSeconds=f"{delay:.1f}",
            )
            self._wait(delay)
        raise AssertionError("unreachable")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def _check_stop(self) -> None:
        if self.should_stop is not None and self.should_stop():
            raise TalentCancelled("stopped while talking to Talent")

    def _wait(self, seconds: float) -> None:
        if self.should_stop is None:
            self._sleep(seconds)
            return
        while seconds > 0:  # in slices, so a stop request is noticed promptly
            self._check_stop()
            step = min(seconds, 0.1)
            self._sleep(step)
            seconds -= step


READ_CHUNK = 65536


def _read_within(response: requests.Response, deadline: float) -> bytes:
    """The body, complete before `deadline` (time.monotonic) or TalentTooSlow: every read waits at most
    for what is left of it (one recv per read, so a trickle cannot stretch a read)."""
    raw = response.raw
    sock = _socket_of(raw)
    chunks: list[bytes] = []
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TalentTooSlow()
        if sock is not None:
            sock.settimeout(remaining)
        try:
            chunk = raw.read1(READ_CHUNK, decode_content=True)
        except (urllib3_exceptions.ReadTimeoutError, TimeoutError):
            raise TalentTooSlow() from None
        if not chunk:
            if (
                raw.closed
                or raw.isclosed()
                or not getattr(raw, "chunked", False)
                or raw.length_remaining == 0
            ):
                return b"".join(chunks)
            continue
        chunks.append(chunk)


def _socket_of(raw: Any) -> socket.socket | None:
    """The connection's socket under urllib3's response, when it exposes one."""
    connection = getattr(raw, "_connection", None) or getattr(raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _payload(content: bytes, listing: bool) -> dict[str, Any]:
    try:
        payload = json.loads(content, parse_float=Decimal)  # decimals keep their digits
    except ValueError:
        raise TalentMalformedAnswer() from None
    if not isinstance(payload, dict) or not isinstance(payload.get("items"), list):
        raise TalentMalformedAnswer()
    if not all(isinstance(i, dict) for i in payload["items"]):
        raise TalentMalformedAnswer()
    if listing and ("nextCursor" not in payload or not isinstance(payload["nextCursor"], str | None)):
        raise TalentMalformedAnswer()
    return payload


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _describe(error: BaseException) -> str:
    """A short cause of a connection failure; never the URL (it may carry credentials)."""
    seen: set[int] = set()
    stack: list[BaseException] = [error]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, ConnectionResetError):
            return "connection reset"
        if isinstance(e, socket.gaierror):
            return "host name not resolved"
        if isinstance(e, TimeoutError):
            return "timed out"
        stack.extend(
            x
            for x in (e.__cause__, e.__context__, getattr(e, "reason", None))
            if isinstance(x, BaseException)
        )
        stack.extend(a for a in e.args if isinstance(a, BaseException))
    return f"connection error ({type(error).__name__})"

"""What the relay puts on Kafka, as pure functions of outbox rows: the producer's settings, the
message headers and value, which rows a failed delivery holds back, and the relay's result.
The I/O is events/relay.py's."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from pin_chessboard_pipelines.events.kafka_client import client_config
from pin_chessboard_pipelines.events.outbox import HEADER_NAMES, TRACEPARENT, payload_bytes
from pin_chessboard_pipelines.observability.logs import counters

DEFAULT_MESSAGE_TIMEOUT_MS = 30_000


def producer_config(bootstrap_servers: str, **overrides: Any) -> dict[str, Any]:
    """The relay's producer: idempotent, acks=all, batched; never auto-creates topics."""
    config: dict[str, Any] = {
        "client.id": "pin-chessboard-outbox-relay",
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "batch.num.messages": 10_000,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 200_000,
        "message.timeout.ms": DEFAULT_MESSAGE_TIMEOUT_MS,
        "allow.auto.create.topics": False,
        # the Java client's partitioner: any client computes the same partition for a key
        "partitioner": "murmur2_random",
    }
    config.update(overrides)
    return client_config(bootstrap_servers, config)


@dataclass
class RelayResult:
    published: int = 0  # rows acknowledged by the broker and marked published
    batches: int = 0
    failed_attempts: int = 0  # batches with at least one failed delivery (or a broker error)
    lock_busy: bool = False  # another relay holds the lock: nothing was done here
    seconds: float = 0.0
    last_error: str | None = None
    stopped_early: bool = False  # max_batches / max_seconds / should_stop ended the call
    failed: bool = False  # the call ended on a failed batch: its rows stay pending

    @property
    def complete(self) -> bool:
        """Everything in scope was published (nothing failed or was left by a limit)."""
        return not (self.failed or self.stopped_early or self.lock_busy)

    @property
    def messages_per_second(self) -> float:
        return self.published / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return counters(
            self,
            after={
                "seconds": {"messagesPerSecond": round(self.messages_per_second, 1)},
                "failed": {"complete": self.complete},
            },
            leave_out=("stopped_early", "failed"),
        )


def kafka_headers(headers_json: str | Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """The row's headers jsonb as Kafka headers: contract names first, in contract order."""
    headers = json.loads(headers_json) if isinstance(headers_json, str) else dict(headers_json)
    out = [(name, str(headers.pop(name)).encode()) for name in HEADER_NAMES if name in headers]
    out.extend((name, str(value).encode()) for name, value in headers.items())
    return out


# A row of outbox_pending_batch, by position: id, topic, key, payload (jsonb text), the contract
# headers in HEADER_NAMES order, the other headers (jsonb text or NULL), the writer's traceparent.
ID, TOPIC, KEY, PAYLOAD, MESSAGE_ID = 0, 1, 2, 3, 4
_FIRST_HEADER_COLUMN = MESSAGE_ID
EXTRA_HEADERS = _FIRST_HEADER_COLUMN + len(HEADER_NAMES)
TRACEPARENT_HEADER = EXTRA_HEADERS + 1


def row_headers(row: Sequence[Any]) -> list[tuple[str, str | bytes | None]]:
    """Kafka headers of a row of `outbox_pending_batch` (contract headers as columns)."""
    values = row[_FIRST_HEADER_COLUMN:EXTRA_HEADERS]
    out: list[tuple[str, str | bytes | None]] = [
        (name, value.encode()) for name, value in zip(HEADER_NAMES, values, strict=True) if value is not None
    ]
    if row[EXTRA_HEADERS]:
        out.extend(kafka_headers(row[EXTRA_HEADERS]))
    if row[TRACEPARENT_HEADER]:  # the writer's trace context, as written (README "Traces")
        out.append((TRACEPARENT, row[TRACEPARENT_HEADER].encode()))
    return out


def batch_headers(rows: Sequence[Sequence[Any]]) -> list[list[tuple[str, str | bytes | None]]]:
    """row_headers of every row; a row with all seven contract headers and no others (the rows every
    writer makes) costs one list display, with the values as str (the client encodes them)."""
    m, o, a, t, e, v, c = HEADER_NAMES
    out: list[list[tuple[str, str | bytes | None]]] = []
    append = out.append
    for row in rows:
        if (
            row[EXTRA_HEADERS] is None
            and row[TRACEPARENT_HEADER] is None
            and None not in row[_FIRST_HEADER_COLUMN:EXTRA_HEADERS]
        ):
            append(
                [(m, row[4]), (o, row[5]), (a, row[6]), (t, row[7]), (e, row[8]), (v, row[9]), (c, row[10])]
            )
        else:
            append(row_headers(row))
    return out


def message_value(payload_json: str | Mapping[str, Any]) -> bytes:
    """The payload jsonb (as text) re-encoded by payload_bytes: compact, whatever jsonb printed."""
    # exact: a jsonb number keeps its digits (987654321098.76543), never through a float
    if isinstance(payload_json, str):
        payload = json.loads(payload_json, parse_float=orjson.Fragment, parse_int=orjson.Fragment)
        return orjson.dumps(payload)
    return payload_bytes(dict(payload_json))


def message_values(payloads: Sequence[str]) -> list[bytes]:
    """message_value of each jsonb text, the whole batch in a few array passes over its bytes.

    jsonb prints `, ` and `: ` between tokens and nothing else outside strings; in a text without a
    backslash every `"` opens or closes a string, so a running parity of the quotes tells what
    lies outside strings, and dropping the space after each `,` and `:` there gives the compact
    form with every number's digits and every string as stored. Texts with a backslash (escapes)
    go through message_value.
    """
    if not payloads:
        return []
    joined = "\n".join(payloads)  # jsonb never prints a raw newline (it is escaped in strings)
    if "\\" not in joined:
        return _compact_plain(joined)
    plain = [p for p in payloads if "\\" not in p]
    compacted = iter(_compact_plain("\n".join(plain)) if plain else [])
    return [message_value(p) if "\\" in p else next(compacted) for p in payloads]


_QUOTE, _COMMA, _COLON, _SPACE = b'"', b",", b":", b" "


def _compact_plain(joined: str) -> list[bytes]:
    # bytes, not characters: a UTF-8 multi-byte sequence holds no byte below 0x80, so no quote,
    # comma, colon or space; numpy's passes leave the interpreter's lock to the relay's other threads.
    # A space after `,` or `:` lies outside strings when an even number of quotes comes before it:
    # one binary search per such space into the quotes' positions, no running pass over every byte.
    data = np.frombuffer(joined.encode(), dtype=np.uint8)
    spaces = np.flatnonzero(data[1:] == _SPACE[0]) + 1
    before = data[spaces - 1]
    spaces = spaces[(before == _COMMA[0]) | (before == _COLON[0])]
    quotes = np.flatnonzero(data == _QUOTE[0])
    spaces = spaces[(np.searchsorted(quotes, spaces) & 1) == 0]
    return np.delete(data, spaces).tobytes().split(b"\n")


def held_back(rows: list[tuple[int, str]], failed_ids: set[int]) -> set[int]:
    """Ids (of `rows` = [(id, key)] in id order) that must stay unpublished after `failed_ids`
    failed: the failed ones and every later row of a key that has a failed row before it."""
    blocked_keys: set[str] = set()
    held: set[int] = set()
    for row_id, key in rows:
        if row_id in failed_ids:
            blocked_keys.add(key)
            held.add(row_id)
        elif key in blocked_keys:
            held.add(row_id)
    return held


def broker_reachable(bootstrap_servers: str, timeout: float = 0.2) -> bool:
    """Whether any bootstrap server accepts a TCP connection (milliseconds when it is down)."""
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False

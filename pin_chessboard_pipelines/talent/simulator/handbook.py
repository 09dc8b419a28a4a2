"""The handbook service's side of the demo (docs/store.md#handbook-sync): the shipped regions and
cities on the compacted topics pin.handbook.regions.v1 / cities.v1, and a rename of one of them.

Key = the id as a decimal string, value = `{id, name, version}` (regions) or
`{id, regionId, name, version}` (cities). The shipped reference data goes out as version 1; a
rename takes a version greater than any before it (milliseconds since the epoch unless given).
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import KafkaError, Producer

from pin_chessboard_pipelines.events.kafka_client import client_config
from pin_chessboard_pipelines.store.handbook import (
    CITIES,
    CITIES_TOPIC,
    HANDBOOK_TOPICS,
    REGIONS,
    REGIONS_TOPIC,
)
from pin_chessboard_pipelines.talent.simulator.publish import create_compacted_topics, json_value

PARTITIONS = 1  # reference data: a few hundred keys


def ensure_handbook_topics(bootstrap_servers: str, timeout: float = 30) -> None:
    """The two handbook topics, compacted; ones that exist are left as they are."""
    create_compacted_topics(bootstrap_servers, dict.fromkeys(HANDBOOK_TOPICS, PARTITIONS), timeout)


def region_value(region_id: int, name: str, version: int) -> dict[str, Any]:
    return {"id": region_id, "name": name, "version": version}


def city_value(city_id: int, region_id: int, name: str, version: int) -> dict[str, Any]:
    return {"id": city_id, "regionId": region_id, "name": name, "version": version}


def publish_values(bootstrap_servers: str, messages: list[tuple[str, int, dict[str, Any] | None]]) -> int:
    """(topic, id, value or None for a tombstone) in order; the count delivered."""
    ensure_handbook_topics(bootstrap_servers)
    producer = Producer(client_config(bootstrap_servers, {"enable.idempotence": True, "linger.ms": 5}))
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Any) -> None:
        if error is not None:
            failures.append(error.str())

    try:
        for topic, ident, value in messages:
            producer.produce(topic, key=str(ident).encode(), value=json_value(value), on_delivery=on_delivery)
        left = producer.flush(30)
    finally:
        producer.close()
    if left or failures:
        raise RuntimeError(f"publishing the handbook failed: {left} undelivered; {'; '.join(failures[:5])}")
    return len(messages)


def publish_handbook(bootstrap_servers: str, version: int = 1) -> dict[str, int]:
    """The shipped regions and cities (store/handbook.py) at `version`; messages per topic."""
    regions: list[dict[str, Any]] = list(REGIONS)
    cities: list[dict[str, Any]] = list(CITIES)
    messages: list[tuple[str, int, dict[str, Any] | None]] = [
        (REGIONS_TOPIC, r["id"], region_value(r["id"], r["name"], version)) for r in regions
    ]
    messages += [
        (CITIES_TOPIC, c["id"], city_value(c["id"], c["region_id"], c["name"], version)) for c in cities
    ]
    publish_values(bootstrap_servers, messages)
    return {REGIONS_TOPIC: len(regions), CITIES_TOPIC: len(cities)}


def rename_version() -> int:
    """A version greater than the shipped data's and any earlier rename's."""
    return time.time_ns() // 1_000_000


def rename_region(
    bootstrap_servers: str, region_id: int, name: str, version: int | None = None
) -> dict[str, Any]:
    value = region_value(region_id, name, version or rename_version())
    publish_values(bootstrap_servers, [(REGIONS_TOPIC, region_id, value)])
    return {"topic": REGIONS_TOPIC, "value": value}


def rename_city(
    bootstrap_servers: str, city_id: int, name: str, region_id: int | None = None, version: int | None = None
) -> dict[str, Any]:
    """A city's rename; its region is the shipped one unless given."""
    if region_id is None:
        cities: list[dict[str, Any]] = list(CITIES)
        shipped = {c["id"]: c["region_id"] for c in cities}
        if city_id not in shipped:
            raise ValueError(f"city {city_id} is not shipped: give its region id")
        region_id = int(shipped[city_id])
    value = city_value(city_id, region_id, name, version or rename_version())
    publish_values(bootstrap_servers, [(CITIES_TOPIC, city_id, value)])
    return {"topic": CITIES_TOPIC, "value": value}

"""A real Prometheus (Debian's) scrapes `pin-chessboard metrics serve` every second while the CLI
runs an import that is killed and resumed, a recalc drain and an outbox relay; the jobs' metrics
are then read through Prometheus's HTTP API and compared with the store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

import pin_chessboard_pipelines.observability as observability
from pin_chessboard_pipelines.observability import samples
from pin_chessboard_pipelines.observability.exporter import exposed_names
from pin_chessboard_pipelines.observability.metrics import count_quarantined
from pin_chessboard_pipelines.observability.samples import FLUSH_SECONDS
from pin_chessboard_pipelines.settings import PROJECT_ROOT
from pin_chessboard_pipelines.store.metric_samples import store_sink
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from tests.support.command_env import command_env
from tests.support.polling import wait_until
from tests.support.prometheus import Prometheus, metrics_serve, prometheus_scraping
from tests.unit.test_dashboard import dashboard_expressions

SPEC = DatasetSpec(
    developers=2,
    projects_per_developer=2,
    objects_per_project=15,
    poison_every=7,
    unknown_enum_every=5,
    latency_ms=30,
)
RULES = sorted((Path(observability.__file__).parent / "rules").glob("*.yml"))
# what a SIGKILLed process may not have flushed: its last FLUSH_SECONDS, with a margin
LOST_SECONDS = 2 * FLUSH_SECONDS


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "pin_chessboard_pipelines.cli", *args]


def _scalar(engine, sql: str) -> float:
    with engine.connect() as conn:
        return float(conn.execute(sa.text(sql)).scalar() or 0)


def _eventually(prometheus: Prometheus, promql: str, expected: float, timeout: float = 30) -> None:
    def equal() -> bool:
        try:
            return prometheus.value(promql) == expected
        except OSError:  # a busy machine may reset one HTTP request: the deadline still holds
            return False

    wait_until(equal, timeout, f"{promql} == {expected}")


def _eventually_within(prometheus: Prometheus, promql: str, low: float, high: float) -> None:
    def within() -> bool:
        try:
            value = prometheus.value(promql)
        except OSError:
            return False
        return value is not None and low <= value <= high

    wait_until(within, 30, f"{low} <= {promql} <= {high}")


@pytest.mark.slow
def test_prometheus_sees_the_jobs_metrics(db_url, engine, tmp_path, talent_sim, kafka_bootstrap):
    sim = talent_sim(SPEC)
    env = command_env(
        db_url,
        tmp_path,
        dagster_home=tmp_path / "dagster_home",
        TALENT_API_URL=sim.url,
        KAFKA_BOOTSTRAP_SERVERS=kafka_bootstrap,
        CHESSBOARD_RECALC_DEBOUNCE_SECONDS="0",
    )
    with metrics_serve(env, PROJECT_ROOT) as target, prometheus_scraping(target, RULES) as prometheus:
        _eventually(prometheus, "max(chessboard_store_up)", 1)
        _eventually(prometheus, "max(chessboard_import_running)", 0)

        # an import killed mid-way: running goes 1 -> 0 (the lock went with the process)
        doomed = subprocess.Popen(
            _cli("import", "--page-size", "2", "--workers", "1"),
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=PROJECT_ROOT,
            start_new_session=True,
        )
        _eventually(prometheus, "max(chessboard_import_running)", 1, timeout=120)
        wait_until(
            lambda: (
                _scalar(
                    engine,
                    "SELECT count(*) FROM chessboard.talent_import_pages WHERE stage = 'PropertyObjects' AND status = 'Done'",
                )
                >= 2
            ),
            120,
            "property-object pages Done",
        )
        killed_at = _scalar(engine, "SELECT extract(epoch FROM now())")
        os.killpg(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=30)
        _eventually(prometheus, "max(chessboard_import_running)", 0)
        _eventually(prometheus, "max(chessboard_import_runs_running)", 1)

        # resumed and completed
        resumed = subprocess.run(
            _cli("import", "--page-size", "2", "--workers", "2"),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=PROJECT_ROOT,
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        for args in (("recalc", "drain", "--until-empty"), ("outbox", "relay", "--until-empty")):
            done = subprocess.run(
                _cli(*args), env=env, capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT
            )
            assert done.returncode == 0, done.stderr[-3000:]

        _eventually(prometheus, "max(chessboard_import_running)", 0)
        _eventually(prometheus, "max(chessboard_import_runs_running)", 0)
        # a SIGKILL loses what the killed process counted since its last flush (observability/
        # samples.py: at most FLUSH_SECONDS): the counters lie between the store's figures without
        # the pages it finished in its last seconds and the store's figures
        lost = f"status = 'Done' AND finished_at BETWEEN to_timestamp({killed_at} - {LOST_SECONDS}) AND to_timestamp({killed_at} + 1)"
        pages = "SELECT count(*) FROM chessboard.talent_import_pages WHERE "
        items = "SELECT coalesce(sum(items_applied + items_skipped + items_failed), 0) FROM chessboard.talent_import_pages WHERE "
        failed_items = "SELECT coalesce(sum(items_failed), 0) FROM chessboard.talent_import_pages WHERE "
        for promql, query in (
            ('sum(chessboard_import_pages_total{status="Done"})', pages),
            ("sum(chessboard_import_items_total)", items),
            ("sum(chessboard_import_failed_items_total)", failed_items),
        ):
            total = _scalar(engine, query + "status = 'Done'")
            _eventually_within(prometheus, promql, total - _scalar(engine, query + lost), total)
        assert _scalar(engine, failed_items + "status = 'Done'") > 0
        assert (prometheus.value("sum(chessboard_sync_unknown_enum_total)") or 0) > 0
        projects = SPEC.developers * SPEC.projects_per_developer
        _eventually(prometheus, 'sum(chessboard_recalc_runs_total{result="success"})', projects)
        _eventually(prometheus, 'sum(chessboard_recalc_republished_total{entity="project"})', projects)
        _eventually(prometheus, "max(chessboard_recalc_queue_depth)", 0)
        _eventually(prometheus, "max(chessboard_recalc_due_backlog)", 0)
        # the import's barrier steps relay the outbox too: the killed one's last relay may be lost
        outbox = "SELECT count(*) FROM chessboard.outbox_messages WHERE published_at "
        published = _scalar(engine, outbox + "IS NOT NULL")
        assert published > 0
        lost_published = _scalar(
            engine,
            outbox + f"BETWEEN to_timestamp({killed_at} - {LOST_SECONDS}) AND to_timestamp({killed_at} + 1)",
        )
        _eventually_within(
            prometheus, "sum(chessboard_outbox_published_total)", published - lost_published, published
        )
        _eventually(prometheus, "max(chessboard_outbox_backlog)", 0)

        # what Prometheus scraped is what rules and the dashboard may name; every panel runs
        scraped = {name for name in prometheus.api("label/__name__/values") if name.startswith("chessboard_")}
        assert scraped <= exposed_names(), sorted(scraped - exposed_names())
        for where, expr in dashboard_expressions().items():
            prometheus.api("query", query=expr)  # raises on an error answer
            assert where
        rules = prometheus.api("rules")["groups"]
        assert {g["name"] for g in rules} >= {
            "chessboard-import",
            "chessboard-recalc",
            "chessboard-outbox",
        }
        assert all(r["health"] == "ok" for g in rules for r in g["rules"]), rules


@pytest.mark.slow
def test_sync_quarantines_keep_their_consumer_through_a_real_scrape(db_url, tmp_path):
    """`chessboard_sync_failed_items_total` names the sync in `consumer`: scraped with the default
    honor_labels (false), the series keep it and the scrape's own `job`; CHESSBOARD_SYNC_FAILED_ITEMS
    fires per consumer, naming it in its `job` label as the other alerts do."""
    env = command_env(db_url, tmp_path)
    with metrics_serve(env, PROJECT_ROOT) as target, prometheus_scraping(target, RULES) as prometheus:
        wait_until(
            lambda: len(prometheus.api("query", query="chessboard_sync_failed_items_total")["result"]) == 2,
            60,
            "the two syncs' series scraped at 0",
        )
        count_quarantined("handbook-sync", 3)  # what handbook-sync counts after a quarantine
        samples.install(store_sink(db_url))
        assert samples.flush(), "the samples were not written"  # where `metrics serve` reads them
        _eventually(
            prometheus, 'sum by (consumer) (chessboard_sync_failed_items_total{consumer="handbook-sync"})', 3
        )
        series = prometheus.api("query", query="chessboard_sync_failed_items_total")["result"]
        assert sorted(s["metric"]["consumer"] for s in series) == ["handbook-sync", "talent-sync"]
        assert all(
            s["metric"]["job"] == "pin-chessboard" and "exported_job" not in s["metric"] for s in series
        )

        def firing() -> list[dict]:
            alerts = prometheus.api("alerts")["alerts"]
            return [a for a in alerts if a["labels"]["alertname"] == "CHESSBOARD_SYNC_FAILED_ITEMS"]

        (alert,) = wait_until(firing, 60, "CHESSBOARD_SYNC_FAILED_ITEMS")
        assert alert["labels"]["consumer"] == alert["labels"]["job"] == "handbook-sync"
        assert "handbook-sync" in alert["annotations"]["summary"]
        assert 'consumer="handbook-sync"' in alert["annotations"]["description"]


@pytest.mark.slow
def test_waiting_dead_letters_fire_their_alert_until_replayed(db_url, engine, tmp_path):
    """A dead letter of talent-sync (a valid developer snapshot that failed earlier) waits in
    `pin-chessboard-talent-sync.dlq`: `metrics serve` exposes it waiting, Prometheus scrapes it and
    CHESSBOARD_CONSUMER_DEAD_LETTERS fires for talent-sync; the replay applies it, the gauge
    drops to 0 and the alert ends."""
    from pin_chessboard_pipelines.entities import ENTITIES
    from pin_chessboard_pipelines.events.dead_letters import (
        DeadLetter,
        DeadLetterWriter,
        Origin,
        replay_dead_letters,
    )
    from pin_chessboard_pipelines.talent_sync import TalentSync
    from tests.support.talent_kafka import own_broker

    developer = {"id": "5b3c1c52-64a4-4e4a-9e0e-0d2b8f1f2a10", "version": 1, "name": "ГК Письмо"}
    with own_broker() as broker:
        letter = DeadLetter(
            Origin(ENTITIES[0].topic, 0, 41), developer["id"].encode(), json.dumps(developer).encode()
        )
        writer = DeadLetterWriter(broker, "pin-chessboard-talent-sync.dlq", "talent-sync")
        writer.send(letter, "developer refused", 3)
        writer.close()
        env = command_env(db_url, tmp_path, drop=("KAFKA_",), KAFKA_BOOTSTRAP_SERVERS=broker)
        with metrics_serve(env, PROJECT_ROOT) as target, prometheus_scraping(target, RULES) as prometheus:
            waiting = 'chessboard_consumer_dead_letters_waiting{consumer="%s"}'
            _eventually(prometheus, waiting % "talent-sync", 1, timeout=60)
            _eventually(prometheus, waiting % "handbook-sync", 0, timeout=60)

            def alerts() -> list[dict]:
                return [
                    a
                    for a in prometheus.api("alerts")["alerts"]
                    if a["labels"]["alertname"] == "CHESSBOARD_CONSUMER_DEAD_LETTERS"
                    and a["state"] == "firing"
                ]

            (alert,) = wait_until(alerts, 60, "CHESSBOARD_CONSUMER_DEAD_LETTERS firing")
            assert alert["labels"]["consumer"] == alert["labels"]["job"] == "talent-sync"
            assert alert["annotations"]["runbook"].startswith("pin-chessboard talent-sync dead-letters")

            replayed = replay_dead_letters(engine, broker, TalentSync(engine, broker))
            assert (replayed.read, replayed.applied) == (1, 1)
            _eventually(prometheus, waiting % "talent-sync", 0, timeout=60)
            wait_until(lambda: not alerts(), 60, "the alert resolved")

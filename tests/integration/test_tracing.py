"""Traces (README "Traces") with an in-memory exporter, real PostgreSQL and a real broker: one trace
per import run (run -> stage -> page -> DB / outbox / recalc request), the writer's traceparent on
the Kafka message, continued by the reference consumer; a drain's project spans under the drain."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from pin_chessboard_pipelines.entities import ENTITIES, PROJECT
from pin_chessboard_pipelines.events.fast_path import relay_pending
from pin_chessboard_pipelines.events.outbox import HEADER_NAMES
from pin_chessboard_pipelines.events.payloads import topic_of
from pin_chessboard_pipelines.events.reference_consumer import EventProjection, read_events
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.recalc.drain import drain
from pin_chessboard_pipelines.store.tables import outbox_messages
from pin_chessboard_pipelines.talent.simulator.dataset import DatasetSpec
from pin_chessboard_pipelines.talent_import.request import build_request
from pin_chessboard_pipelines.talent_import.runner import ImportSession
from pin_chessboard_pipelines.talent_import.sources import ApiPullSource
from tests.support.import_probe import CLIENT, FAST
from tests.support.recalc_data import StoreBuilder, standard_project

SPEC = DatasetSpec(developers=1, projects_per_developer=2, layouts_per_project=2, objects_per_project=6)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.configure_tracing(exporter=exporter)
    try:
        yield exporter
    finally:
        tracing.reset_tracing()


def _traceparent(value: str) -> tuple[int, int]:
    """(trace id, parent span id) of a W3C traceparent."""
    version, trace_id, span_id, _flags = value.split("-")
    assert version == "00"
    return int(trace_id, 16), int(span_id, 16)


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_an_import_run_is_one_trace_that_its_events_and_their_consumer_continue(
    db_url, engine, talent_sim, kafka_bootstrap, spans
):
    sim = talent_sim(SPEC)
    request = build_request(page_size=4, workers=2)
    source = ApiPullSource(sim.url, client_options=CLIENT)
    assert ImportSession(db_url, request, source, options=FAST).run_here().status == "Completed"

    finished = spans.get_finished_spans()
    (run,) = [s for s in finished if s.name == "talent_import.run"]
    trace_id = run.context.trace_id
    assert run.parent is None and run.attributes["pin.correlation_id"] == request.correlation_id
    assert run.attributes["pin.import.mode"] == "ApiPull"
    # every span of the import belongs to that one trace
    assert all(s.context.trace_id == trace_id for s in finished if s.name.startswith("talent_import."))
    in_trace = {s.context.span_id: s for s in finished if s.context.trace_id == trace_id}

    stages = {s.context.span_id: s for s in in_trace.values() if s.name == "talent_import.stage"}
    assert sorted(s.attributes["pin.import.stage"] for s in stages.values()) == sorted(
        e.stage for e in ENTITIES
    )
    assert all(_parent(s) == run.context.span_id for s in stages.values())

    pages = {s.context.span_id: s for s in in_trace.values() if s.name == "talent_import.page"}
    assert pages and all(_parent(s) in stages for s in pages.values())
    assert sum(s.attributes["pin.import.applied"] for s in pages.values()) == sum(
        s.attributes["pin.import.applied"] for s in stages.values()
    )
    children = [s for s in in_trace.values() if _parent(s) in pages]
    writes = [s for s in children if s.name == "outbox.write"]
    assert writes and all(s.kind == SpanKind.PRODUCER for s in writes)
    assert any(s.name == "recalc.request" for s in children)
    db_spans = [s for s in children if s.kind == SpanKind.CLIENT and "db.system" in (s.attributes or {})]
    assert db_spans  # the psycopg2 instrumentation: the page's statements (hold, apply, Done mark)
    assert all(s.name.split()[0].isalpha() for s in db_spans)  # named by their keyword, not a comment
    http = [s for s in in_trace.values() if s.kind == SpanKind.CLIENT and s not in db_spans]
    assert http  # the requests instrumentation: the Talent API pages

    # the outbox rows carry their writer's context, and so do the Kafka messages
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(outbox_messages.c.message_id, outbox_messages.c.headers)
            .where(outbox_messages.c.topic == topic_of(PROJECT.upserted_event))
            .order_by(outbox_messages.c.id)
            .limit(1)
        ).one()
    assert _traceparent(row.headers["traceparent"])[0] == trace_id
    spans.clear()
    assert relay_pending(engine, kafka_bootstrap, until_empty=True).complete
    (event,) = [
        e
        for e in read_events(
            kafka_bootstrap,
            [topic_of(PROJECT.upserted_event)],
            until=lambda events: any(e.message_id == str(row.message_id) for e in events),
        )
        if e.message_id == str(row.message_id)
    ]
    assert list(event.headers) == [*HEADER_NAMES, "traceparent"]  # the contract's seven, then the trace
    message_trace, message_parent = _traceparent(event.headers["traceparent"])
    assert message_trace == trace_id
    assert in_trace[message_parent].name == "outbox.write"

    relays = [s for s in spans.get_finished_spans() if s.name == "outbox.relay"]
    assert relays and all(s.context.trace_id != trace_id for s in relays)  # the relay's own trace
    assert any(link.context.trace_id == trace_id for s in relays for link in s.links)

    spans.clear()
    assert EventProjection().apply(event) == "applied"
    (process,) = spans.get_finished_spans()
    assert process.name == f"process {event.topic}" and process.kind == SpanKind.CONSUMER
    assert (process.context.trace_id, _parent(process)) == (trace_id, message_parent)


def test_a_drain_traces_each_project_under_the_drain(engine, spans):
    with engine.begin() as conn:
        builder = StoreBuilder(conn)
        projects = [standard_project(builder) for _ in range(2)]
        for project in projects:
            builder.request(project)
    result = drain(engine, correlation_id="drain-1")
    assert result.recalculated == 2

    finished = spans.get_finished_spans()
    (run,) = [s for s in finished if s.name == "recalc.drain"]
    assert (
        run.attributes["pin.correlation_id"] == "drain-1" and run.attributes["pin.recalc.recalculated"] == 2
    )
    per_project = [s for s in finished if s.name == "recalc.project"]
    assert {s.attributes["pin.project.id"] for s in per_project} == {str(p.id) for p in projects}
    for span in per_project:
        assert (span.context.trace_id, _parent(span)) == (run.context.trace_id, run.context.span_id)
        assert span.attributes["pin.recalc.result"] == "recalculated"
        assert span.attributes["pin.recalc.last_reason"] == "Crud" and span.attributes["pin.tenant.id"]
    writes = [s for s in finished if s.name == "outbox.write"]
    assert {_parent(s) for s in writes} == {s.context.span_id for s in per_project}
    with engine.connect() as conn:
        headers = conn.execute(sa.select(outbox_messages.c.headers)).scalars().all()
    assert headers and {_traceparent(h["traceparent"])[1] for h in headers} == {
        s.context.span_id for s in writes
    }

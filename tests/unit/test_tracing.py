"""Tracing setup (README "Traces"): nothing without an endpoint, the OTLP endpoint from settings."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.events import outbox
from pin_chessboard_pipelines.events.payloads import PROJECT_UPSERTED
from pin_chessboard_pipelines.observability import tracing
from pin_chessboard_pipelines.settings import load_settings


def test_without_an_endpoint_nothing_is_configured_or_exported():
    assert load_settings({}).otel_traces_endpoint is None
    assert not tracing.configure_tracing(load_settings({}))
    assert not tracing.tracing_enabled()
    with tracing.span("talent_import.page", {"pin.import.page_no": 1}) as span:
        assert not span.is_recording()
        assert tracing.current_traceparent() is None
    assert not tracing.root_span("talent_import.run").is_recording()
    # the global provider is never touched: a library tracing through it exports nothing either
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    lines = outbox._batch_lines([(PROJECT_UPSERTED, "k", {"id": "k"})], "corr")
    assert "traceparent" not in lines[0]


def test_sdk_disabled_wins_over_an_endpoint():
    settings = load_settings(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}
    )
    assert not tracing.configure_tracing(settings)


def test_the_traces_endpoint_follows_the_otlp_http_rules():
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert load_settings(base).otel_traces_endpoint == "http://collector:4318/v1/traces"
    signal = {**base, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example/api/v1/spans"}
    assert load_settings(signal).otel_traces_endpoint == "https://traces.example/api/v1/spans"
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        load_settings({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
    with pytest.raises(ConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        load_settings({**base, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})


def test_an_exporter_records_spans_and_the_traceparent_names_the_current_span():
    exporter = InMemorySpanExporter()
    assert tracing.configure_tracing(exporter=exporter)
    try:
        root = tracing.root_span("talent_import.run", trace_key="correlation-1")
        with tracing.span("talent_import.stage", parent=tracing.context_of(root)) as stage:
            traceparent = tracing.current_traceparent()
            lines = outbox._batch_lines([(PROJECT_UPSERTED, "k", {"id": "k"})], "corr")
        tracing.end_span(root)
        context = stage.get_span_context()
        assert traceparent is not None  # version 00, the stage span, sampled
        assert traceparent.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")
        assert int(traceparent[-2:], 16) & 1
        assert f'"traceparent":"{traceparent}"' in lines[0]
        # the trace id follows the key: a resumed run lands in the same trace
        assert root.get_span_context().trace_id == tracing.trace_id_of("correlation-1")
        assert [s.name for s in exporter.get_finished_spans()] == ["talent_import.stage", "talent_import.run"]
        remote = tracing.context_from_traceparent(traceparent)
        assert remote is not None and tracing.context_from_traceparent("00-garbage") is None
        assert len(tracing.links_from_traceparents([traceparent, traceparent, None])) == 1
    finally:
        tracing.reset_tracing()
    assert not tracing.tracing_enabled()

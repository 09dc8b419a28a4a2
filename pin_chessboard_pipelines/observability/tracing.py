"""Traces (OpenTelemetry; README.md, "Traces"): the spans of the import, the recalc drain, the
outbox relay and talent-sync, and the W3C `traceparent` that carries an import's (or a drain's)
trace into every pin.chessboard.* message.

Nothing happens at import time. `configure_tracing()` (once per process: the CLI's main, the
Dagster resource at run start) builds a TracerProvider only when OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, or when a test hands it an exporter; otherwise every
helper here is a no-op that costs a flag check. The service name and resource attributes are the
SDK's (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES; default service name pin-chessboard-pipelines),
so are the batch processor and exporter settings (OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS, ..._TIMEOUT).
The sampler is the project's: parent-based, every root span but a stray client call.

The DB and Talent API spans come from the maintained psycopg2 and requests instrumentations, given
this module's provider explicitly: the global provider is left alone, so tests can install and
remove an in-memory exporter. Kafka spans are this project's own (the confluent-kafka
instrumentation makes one span per produced message and injects the relay's context, where the
message must carry the writer's).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from pin_chessboard_pipelines.settings import Settings, load_settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "pin-chessboard-pipelines"
TRACER_NAME = "pin_chessboard_pipelines"
TRACEPARENT = "traceparent"
# at most this many links on a relay batch span (the SDK's default limit is 128)
MAX_LINKS = 64

T = TypeVar("T")
P = ParamSpec("P")
Attributes = Mapping[str, Any]

_lock = threading.Lock()
_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None
_propagator = TraceContextTextMapPropagator()
# a trace id chosen by root_span() for the span it starts (see _SeededIds)
_seed_trace_id: ContextVar[int | None] = ContextVar("pin_seed_trace_id", default=None)


# -- setup --------------------------------------------------------------------------------------


def configure_tracing(settings: Settings | None = None, *, exporter: SpanExporter | None = None) -> bool:
    """Sets up tracing for this process once; True when spans are recorded.

    `exporter` (tests: an InMemorySpanExporter) replaces the OTLP exporter and is fed synchronously.
    """
    global _provider, _tracer
    with _lock:
        if _provider is not None:
            return True
        if exporter is None:
            settings = settings or load_settings()
            if settings.otel_sdk_disabled or not settings.otel_traces_endpoint:
                return False
        # the SDK, the exporter and the instrumentations load only in a process that traces
        from opentelemetry.instrumentation.psycopg2 import Psycopg2Instrumentor
        from opentelemetry.instrumentation.requests import RequestsInstrumentor
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

        resource = Resource.create()
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
        provider = TracerProvider(resource=resource, id_generator=_seeded_id_generator(), sampler=_sampler())
        if exporter is not None:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            assert settings is not None and settings.otel_traces_endpoint
            provider.add_span_processor(
                BatchSpanProcessor(OTLPSpanExporter(endpoint=settings.otel_traces_endpoint))
            )
        Psycopg2Instrumentor().instrument(tracer_provider=provider, skip_dep_check=True)
        RequestsInstrumentor().instrument(tracer_provider=provider)
        _provider = provider
        _tracer = provider.get_tracer(TRACER_NAME)
        if exporter is None:
            log.info("traces exported to %s", settings.otel_traces_endpoint if settings else "-")
        return True


def reset_tracing() -> None:
    """Flushes and removes the provider and the instrumentations (tests; a process exit flushes by itself)."""
    global _provider, _tracer
    with _lock:
        provider, _provider, _tracer = _provider, None, None
        if provider is None:
            return
        from opentelemetry.instrumentation.psycopg2 import Psycopg2Instrumentor
        from opentelemetry.instrumentation.requests import RequestsInstrumentor

        Psycopg2Instrumentor().uninstrument()
        RequestsInstrumentor().uninstrument()
        provider.shutdown()


def tracing_enabled() -> bool:
    return _tracer is not None


def _sampler() -> Any:
    """Parent-based; a root span is recorded unless it is a client call (a DB statement or an HTTP
    request outside any span of a job: a sensor's query would otherwise be a trace of its own)."""
    from opentelemetry.sdk.trace.sampling import (
        ALWAYS_ON,
        Decision,
        ParentBased,
        Sampler,
        SamplingResult,
    )

    class _NoClientRoots(Sampler):
        def should_sample(
            self,
            parent_context: Any,
            trace_id: int,
            name: str,
            kind: SpanKind | None = None,
            attributes: Any = None,
            links: Any = None,
            trace_state: Any = None,
        ) -> SamplingResult:
            if kind == SpanKind.CLIENT:
                return SamplingResult(Decision.DROP)
            return ALWAYS_ON.should_sample(
                parent_context, trace_id, name, kind, attributes, links, trace_state
            )

        def get_description(self) -> str:
            return "NoClientRoots"

    return ParentBased(root=_NoClientRoots())


def _seeded_id_generator() -> Any:
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    class _SeededIds(RandomIdGenerator):
        """Random ids, except a root span's trace id that root_span() chose."""

        def generate_trace_id(self) -> int:
            seeded = _seed_trace_id.get()
            return seeded if seeded is not None else super().generate_trace_id()

    return _SeededIds()


# -- spans --------------------------------------------------------------------------------------


@contextmanager
def span(
    name: str,
    attributes: Attributes | None = None,
    *,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: otel_context.Context | None = None,
    links: Iterable[Link] | None = None,
) -> Iterator[Span]:
    """A span that is current inside the block (child of `parent`, else of the current span); an
    exception leaving the block is recorded and sets the status to ERROR."""
    tracer = _tracer
    if tracer is None:
        yield INVALID_SPAN
        return
    with tracer.start_as_current_span(
        name, context=parent, kind=kind, attributes=_clean(attributes), links=list(links or ())
    ) as current:
        yield current


def traced(
    name: str,
    attributes: Callable[[tuple[Any, ...], dict[str, Any]], Attributes],
    ended: Callable[[Span, Any], None],
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """A decorator: when tracing is on, each call runs in a span `name` that starts with
    `attributes(args, kwargs)` (which may fill in a keyword argument) and to which `ended(span,
    result)` adds what the call returned."""

    def decorate(fn: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(fn)
        def in_span(*args: P.args, **kwargs: P.kwargs) -> T:
            if _tracer is None:
                return fn(*args, **kwargs)
            with span(name, attributes(args, kwargs)) as current:
                result = fn(*args, **kwargs)
                ended(current, result)
                return result

        return in_span

    return decorate


def root_span(name: str, attributes: Attributes | None = None, *, trace_key: str | None = None) -> Span:
    """A started (not current) root span; the caller ends it. With `trace_key` the trace id is a
    hash of it, so every process that serves the same key (an import run resumed by another Dagster
    run) adds its root span to the same trace."""
    tracer = _tracer
    if tracer is None:
        return INVALID_SPAN
    token = _seed_trace_id.set(trace_id_of(trace_key) if trace_key else None)
    try:
        return tracer.start_span(name, context=otel_context.Context(), attributes=_clean(attributes))
    finally:
        _seed_trace_id.reset(token)


def trace_id_of(key: str) -> int:
    """128 bits of SHA-256(key): random-looking, as ratio samplers expect, and never 0."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:16], "big") or 1


def context_of(parent: Span) -> otel_context.Context | None:
    """The context whose current span is `parent` (for span(parent=...)); None when not tracing."""
    if _tracer is None or not parent.get_span_context().is_valid:
        return None
    return trace.set_span_in_context(parent, otel_context.Context())


def set_attributes(attributes: Attributes) -> None:
    """On the current span (nothing when there is none)."""
    if _tracer is not None:
        trace.get_current_span().set_attributes(_clean(attributes) or {})


def record_error(error: BaseException) -> None:
    """The current span failed with `error` (the caller handled it)."""
    if _tracer is not None:
        current = trace.get_current_span()
        current.record_exception(error)
        current.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"[:200]))


def end_span(done: Span, error: str | None = None) -> None:
    """Ends `done` unless it has ended already (a recording span stops recording at its end)."""
    if not done.is_recording():
        return
    if error is not None:
        done.set_status(Status(StatusCode.ERROR, error[:200]))
    done.end()


def bind(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` running in the caller's trace context in whatever thread calls it (threads and pools do
    not inherit the context)."""
    if _tracer is None:
        return fn
    captured = otel_context.get_current()

    def in_context(*args: Any, **kwargs: Any) -> T:
        token = otel_context.attach(captured)
        try:
            return fn(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return in_context


def _clean(attributes: Attributes | None) -> dict[str, Any] | None:
    """Attributes without None values (OTel rejects them); UUIDs and the like as text."""
    if not attributes:
        return None
    return {
        key: value if isinstance(value, str | bool | int | float) else str(value)
        for key, value in attributes.items()
        if value is not None
    }


# -- W3C trace context in messages ---------------------------------------------------------------


def current_traceparent() -> str | None:
    """The W3C traceparent of the current span, None when there is none (or no tracing)."""
    if _tracer is None:
        return None
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    return carrier.get(TRACEPARENT)


def context_from_traceparent(traceparent: str | None) -> otel_context.Context | None:
    """The remote parent a message's traceparent names; None when absent or malformed."""
    if not traceparent or _tracer is None:
        return None
    extracted = _propagator.extract({TRACEPARENT: traceparent}, context=otel_context.Context())
    return extracted if trace.get_current_span(extracted).get_span_context().is_valid else None


def links_from_traceparents(traceparents: Iterable[str | None]) -> list[Link]:
    """Links to the distinct contexts of `traceparents` (at most MAX_LINKS)."""
    if _tracer is None:
        return []
    links: list[Link] = []
    for value in dict.fromkeys(t for t in traceparents if t):
        parent = context_from_traceparent(value)
        if parent is not None:
            links.append(Link(trace.get_current_span(parent).get_span_context()))
            if len(links) >= MAX_LINKS:
                break
    return links

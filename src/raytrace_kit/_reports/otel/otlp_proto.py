"""Spans as OTLP protobuf messages (``ExportTraceServiceRequest``), with opentelemetry-proto.

Imported only to send spans to an endpoint (``raytrace-kit export otlp``), never by
``import raytrace_kit``: :func:`load` says which package to install when it is missing.
"""

from __future__ import annotations

from types import ModuleType

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Status
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from raytrace_kit._reports.otel.spans import SCOPE, SCOPE_VERSION, Resource, Span, Value

__all__ = ["ExportTraceServiceResponse", "attribute", "request"]

_INTERNAL = ProtoSpan.SpanKind.SPAN_KIND_INTERNAL


def attribute(key: str, value: Value) -> KeyValue:
    """A ``KeyValue``: the value under its type's field (``bool`` before ``int``)."""
    if isinstance(value, bool):
        return KeyValue(key=key, value=AnyValue(bool_value=value))
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, float):
        return KeyValue(key=key, value=AnyValue(double_value=value))
    return KeyValue(key=key, value=AnyValue(string_value=value))


def _span(span: Span) -> ProtoSpan:
    return ProtoSpan(
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        name=span.name,
        kind=_INTERNAL,
        start_time_unix_nano=span.start_ns,
        end_time_unix_nano=span.end_ns,
        attributes=[attribute(k, v) for k, v in span.attributes.items()],
        events=[
            ProtoSpan.Event(
                time_unix_nano=event.time_ns,
                name=event.name,
                attributes=[attribute(k, v) for k, v in event.attributes.items()],
            )
            for event in span.events
        ],
        dropped_events_count=span.dropped_events,
        status=Status(code=span.status_code, message=span.status_message),  # type: ignore[arg-type]
    )


def request(spans: list[Span]) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest``: the spans grouped by their process's resource."""
    grouped: dict[Resource, list[Span]] = {}
    for span in spans:
        grouped.setdefault(span.resource, []).append(span)
    scope = InstrumentationScope(name=SCOPE, version=SCOPE_VERSION)
    return ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=ProtoResource(attributes=[attribute(k, v) for k, v in resource]),
                scope_spans=[ScopeSpans(scope=scope, spans=[_span(span) for span in members])],
            )
            for resource, members in grouped.items()
        ]
    )


def load() -> ModuleType:
    """This module: for callers that import it only when spans are sent."""
    import sys  # noqa: PLC0415

    return sys.modules[__name__]

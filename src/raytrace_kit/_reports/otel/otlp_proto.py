"""Spans as OTLP protobuf messages (``ExportTraceServiceRequest``), with opentelemetry-proto.

Imported only to send spans to an endpoint (``raytrace-kit export otlp``), never by
``import raytrace_kit``: ``otlp_http.proto_encoder()`` imports it, and says which package to
install when it is missing.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from raytrace_kit._reports.otel.spans import SCOPE, SCOPE_VERSION, Resource, Span, Value

__all__ = ["ExportTraceServiceResponse", "request"]

_INTERNAL = ProtoSpan.SpanKind.SPAN_KIND_INTERNAL


def _fill(into: AnyValue, value: Value) -> None:
    kind = type(value)
    if kind is str:
        into.string_value = value  # type: ignore[assignment]
    elif kind is int:
        into.int_value = value  # type: ignore[assignment]
    elif kind is float:
        into.double_value = value  # type: ignore[assignment]
    elif kind is bool:
        into.bool_value = value  # type: ignore[assignment]
    else:
        into.string_value = str(value)


def _attributes(into: Any, attributes: dict[str, Value]) -> None:
    """Append each attribute to a repeated ``KeyValue`` field, in place (no copies)."""
    for key, value in attributes.items():
        pair = into.add()
        pair.key = key
        _fill(pair.value, value)


def _span(into: ProtoSpan, span: Span) -> None:
    into.trace_id = span.trace_id
    into.span_id = span.span_id
    if span.parent_span_id:
        into.parent_span_id = span.parent_span_id
    into.name = span.name
    into.kind = _INTERNAL
    into.start_time_unix_nano = span.start_ns
    into.end_time_unix_nano = span.end_ns
    _attributes(into.attributes, span.attributes)
    for event in span.events:
        added = into.events.add()
        added.time_unix_nano = event.time_ns
        added.name = event.name
        _attributes(added.attributes, event.attributes)
    if span.dropped_events:
        into.dropped_events_count = span.dropped_events
    if span.status_code:
        into.status.code = span.status_code  # type: ignore[assignment]
    if span.status_message:
        into.status.message = span.status_message


def request(spans: list[Span]) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest``: the spans grouped by their process's resource.

    Built in place, top down: a message passed to a constructor is copied, and each
    level of copying costs as much as building the spans.
    """
    grouped: dict[Resource, list[Span]] = {}
    for span in spans:
        grouped.setdefault(span.resource, []).append(span)
    made = ExportTraceServiceRequest()
    for resource, members in grouped.items():
        resource_spans = made.resource_spans.add()
        _attributes(resource_spans.resource.attributes, dict(resource))
        scope_spans = resource_spans.scope_spans.add()
        scope_spans.scope.name = SCOPE
        scope_spans.scope.version = SCOPE_VERSION
        added = scope_spans.spans
        for span in members:
            _span(added.add(), span)
    return made

"""Spans in OTLP's JSON encoding, and the OTLP JSON file: one export request per line.

The JSON encoding of OTLP (the OpenTelemetry protocol specification, "JSON Protobuf
Encoding") is protobuf's JSON mapping with three rules of its own: field names in
lowerCamelCase, trace and span ids as hex (not base64), enums as integers. 64-bit
integers (times in ns, ``intValue``) are strings, as protobuf's mapping has them. A file
of such requests, one per line, is what the OpenTelemetry Collector's ``otlpjsonfile``
receiver and the file exporter's "JSON lines" read and write. Needs no OpenTelemetry
package: the encoding is written here, with msgspec.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

import msgspec

from raytrace_kit._reports.otel.spans import SCOPE, SCOPE_VERSION, Resource, Span, SpanEvent, Value

__all__ = ["Encoder", "JsonFile", "attribute", "attributes", "request"]

_INTERNAL = 1  # SpanKind.SPAN_KIND_INTERNAL: a call inside the program
_ENCODE = msgspec.json.Encoder().encode


def attribute(key: str, value: Value) -> dict[str, Any]:
    """A ``KeyValue``: the value under its type's name (``bool`` before ``int``)."""
    kind = type(value)
    if kind is str:
        typed: dict[str, Any] = {"stringValue": value}
    elif kind is bool:
        typed = {"boolValue": value}
    elif kind is int:
        typed = {"intValue": str(value)}
    elif kind is float:
        typed = {"doubleValue": value}
    else:
        typed = {"stringValue": str(value)}
    return {"key": key, "value": typed}


def attributes(found: dict[str, Value]) -> list[dict[str, Any]]:
    """The ``KeyValue`` list of a span's attributes (:func:`attribute`, inlined: the hot path)."""
    return [
        {"key": key, "value": {"stringValue": value}}
        if type(value) is str
        else {"key": key, "value": {"intValue": str(value)}}
        if type(value) is int
        else {"key": key, "value": {"doubleValue": value}}
        if type(value) is float
        else attribute(key, value)
        for key, value in found.items()
    ]


class Encoder:
    """Spans to OTLP JSON requests."""

    def _event(self, event: SpanEvent) -> dict[str, Any]:
        return {
            "timeUnixNano": str(event.time_ns),
            "name": event.name,
            "attributes": attributes(event.attributes),
        }

    def _span(self, span: Span) -> dict[str, Any]:
        made: dict[str, Any] = {"traceId": span.trace_id.hex(), "spanId": span.span_id.hex()}
        if span.parent_span_id:
            made["parentSpanId"] = span.parent_span_id.hex()
        made["name"] = span.name
        made["kind"] = _INTERNAL
        made["startTimeUnixNano"] = str(span.start_ns)
        made["endTimeUnixNano"] = str(span.end_ns)
        made["attributes"] = attributes(span.attributes)
        if span.events:
            made["events"] = [self._event(event) for event in span.events]
        if span.dropped_events:
            made["droppedEventsCount"] = span.dropped_events
        status: dict[str, Any] = {}
        if span.status_message:
            status["message"] = span.status_message
        if span.status_code:
            status["code"] = span.status_code
        made["status"] = status
        return made

    def request(self, spans: list[Span]) -> dict[str, Any]:
        """An ``ExportTraceServiceRequest``: the spans grouped by their process's resource."""
        grouped: dict[Resource, list[Span]] = {}
        for span in spans:
            grouped.setdefault(span.resource, []).append(span)
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": attributes(dict(resource))},
                    "scopeSpans": [
                        {
                            "scope": {"name": SCOPE, "version": SCOPE_VERSION},
                            "spans": [self._span(span) for span in members],
                        }
                    ],
                }
                for resource, members in grouped.items()
            ]
        }

    def encode(self, spans: list[Span]) -> bytes:
        """The request of ``spans`` as JSON bytes (one line: JSON escapes newlines)."""
        return _ENCODE(self.request(spans))


def request(spans: list[Span]) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` of ``spans`` as OTLP JSON (a dict)."""
    return Encoder().request(spans)


class JsonFile:
    """A sink writing each batch of spans as one line of an OTLP JSON file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._handle: IO[bytes] = self.path.open("wb")
        self._encoder = Encoder()

    def send(self, spans: list[Span]) -> None:
        """Write one request line."""
        self._handle.write(self._encoder.encode(spans) + b"\n")

    def close(self) -> None:
        """Close the file."""
        self._handle.close()

"""Spans handed to an OpenTelemetry SDK span exporter: ``Session.to_otel(exporter)``, gRPC.

Each :class:`~.spans.Span` becomes an SDK ``ReadableSpan`` (what every SDK exporter takes:
the in-memory one, the console one, OTLP over gRPC or HTTP, a vendor's), in batches.
Imports the SDK, the ``otel`` extra: imported only when spans go to an SDK exporter
(:func:`raytrace_kit._reports.otel.export.sdk_module` says what to install otherwise).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.sdk.resources import Resource as SdkResource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
from opentelemetry.trace.status import Status, StatusCode

from raytrace_kit._reports.otel.spans import SCOPE, SCOPE_VERSION, Resource, Span
from raytrace_kit.exceptions import ExportError, MissingExtraError

__all__ = ["Exporter", "grpc_exporter", "readable"]

_GRPC_PACKAGE = "opentelemetry-exporter-otlp-proto-grpc"
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SCOPE = InstrumentationScope(SCOPE, SCOPE_VERSION)


def readable(span: Span, resource: SdkResource) -> ReadableSpan:
    """The SDK's ``ReadableSpan`` of a span, in ``resource`` (its process's)."""
    trace_id = int.from_bytes(span.trace_id, "big")
    context = SpanContext(trace_id, int.from_bytes(span.span_id, "big"), False, _SAMPLED)
    parent = None
    if span.parent_span_id:
        parent = SpanContext(trace_id, int.from_bytes(span.parent_span_id, "big"), False, _SAMPLED)
    code = StatusCode.ERROR if span.status_code else StatusCode.UNSET
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=span.attributes,
        events=[Event(event.name, event.attributes, event.time_ns) for event in span.events],
        kind=SpanKind.INTERNAL,
        status=Status(code, span.status_message or None),
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=_SCOPE,
    )


class Exporter:
    """A sink handing each batch of spans to an SDK span exporter.

    Args:
        exporter: Any ``opentelemetry.sdk.trace.export.SpanExporter``. It is flushed at
            :meth:`close`, not shut down: it stays the caller's.
        name: How errors name it.
    """

    def __init__(self, exporter: SpanExporter, name: str | None = None) -> None:
        self.exporter = exporter
        self.name = name or type(exporter).__name__
        self._resources: dict[Resource, SdkResource] = {}
        self.rejected = 0

    def _resource(self, resource: Resource) -> SdkResource:
        found = self._resources.get(resource)
        if found is None:
            found = self._resources[resource] = SdkResource(dict(resource))
        return found

    def send(self, spans: Iterable[Span]) -> None:
        """Export one batch.

        Raises:
            ExportError: The exporter says the batch failed.
        """
        result = self.exporter.export([readable(s, self._resource(s.resource)) for s in spans])
        if result != SpanExportResult.SUCCESS:
            msg = (
                f"{self.name} could not export the spans (it answered {result.name}): see "
                "what it logged for why"
            )
            raise ExportError(msg)

    def close(self) -> None:
        """Flush the exporter (it is the caller's to shut down)."""
        self.exporter.force_flush()


def grpc_exporter(endpoint: str, headers: dict[str, str], timeout_s: float) -> Exporter:
    """A sink sending spans over OTLP/gRPC, through OpenTelemetry's gRPC exporter package.

    Raises:
        MissingExtraError: The gRPC exporter package is not installed.
    """
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found]  # noqa: PLC0415 -- an optional package
            OTLPSpanExporter,
        )
    except ImportError as exc:
        msg = (
            f"--protocol grpc needs OpenTelemetry's gRPC exporter ({exc.name or _GRPC_PACKAGE} "
            f"is missing): pip install {_GRPC_PACKAGE}. Or send OTLP/HTTP, the default "
            "protocol (a collector's port 4318): --endpoint http://HOST:4318"
        )
        raise MissingExtraError(msg) from exc
    exporter: Any = OTLPSpanExporter(
        endpoint=endpoint,
        insecure=endpoint.startswith("http://"),
        headers=headers,
        timeout=timeout_s,
    )
    return Exporter(exporter, f"the OTLP/gRPC exporter for {endpoint}")

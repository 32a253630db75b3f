"""Exporting a session's spans: to an OTLP JSON file, an OTLP endpoint, an SDK exporter.

Spans go out in batches as they are made (:func:`.stream.session_spans`): a run of any
size exports in bounded memory. Each destination is a *sink* with ``send(batch)`` and
``close()``: :class:`.otlp_json.JsonFile`, :class:`.otlp_http.Http`,
:class:`.sdk.Exporter`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from raytrace_kit._reports.otel.otlp_http import EXTRA, Http
from raytrace_kit._reports.otel.otlp_json import JsonFile
from raytrace_kit._reports.otel.spans import Span
from raytrace_kit._reports.otel.stream import SpanCounts, session_spans
from raytrace_kit.exceptions import InvalidValueError, MissingExtraError

if TYPE_CHECKING:
    from raytrace_kit._reports.reading.session import Session

__all__ = [
    "BATCH",
    "PROTOCOLS",
    "Sink",
    "endpoint_sink",
    "sdk_module",
    "send",
    "to_json_file",
    "to_otel",
    "to_sink",
]

BATCH = 512  # spans per request: a few hundred KB, well under receivers' 4 MB limits
PROTOCOLS = ("http/protobuf", "http/json", "grpc")  # as OTEL_EXPORTER_OTLP_PROTOCOL says


class Sink(Protocol):
    """Where batches of spans go."""

    def send(self, spans: list[Span]) -> None:
        """Deliver one batch (raise if it cannot)."""

    def close(self) -> None:
        """Finish: flush, close files."""


def send(
    spans: Iterable[Span], sink: Sink, batch: int = BATCH, counts: SpanCounts | None = None
) -> SpanCounts:
    """Send ``spans`` to ``sink`` in batches of ``batch``; close it; return what was sent.

    Raises:
        InvalidValueError: ``batch`` is not a positive number.
    """
    if batch < 1:
        msg = f"batch size {batch} is not a positive number of spans"
        raise InvalidValueError(msg)
    counts = counts if counts is not None else SpanCounts()
    pending: list[Span] = []
    try:
        for span in spans:
            pending.append(span)
            if len(pending) >= batch:
                sink.send(pending)
                for sent in pending:
                    counts.add(sent)
                pending = []
        if pending:
            sink.send(pending)
            for sent in pending:
                counts.add(sent)
    finally:
        sink.close()
    return counts


def sdk_module() -> ModuleType:
    """:mod:`.sdk`, which imports OpenTelemetry's SDK.

    Raises:
        MissingExtraError: The SDK is not installed.
    """
    try:
        from raytrace_kit._reports.otel import sdk  # noqa: PLC0415 -- the otel extra
    except ImportError as exc:
        msg = (
            "handing spans to an OpenTelemetry exporter needs the OpenTelemetry SDK "
            f"({exc.name or 'opentelemetry-sdk'} is missing): {EXTRA}"
        )
        raise MissingExtraError(msg) from exc
    return sdk


def to_sink(
    session: Session, sink: Sink, *, service_name: str = "ray", batch: int = BATCH
) -> SpanCounts:
    """Every span of ``session`` sent to ``sink``; what was sent, and what was left out."""
    counts = SpanCounts()
    spans = session_spans(session, service_name=service_name, counts=counts)
    return send(spans, sink, batch, counts)


def to_otel(
    session: Session, exporter: Any, *, service_name: str = "ray", batch: int = BATCH
) -> SpanCounts:
    """Every span of ``session``, handed to an SDK span exporter (see ``Session.to_otel``)."""
    sink = sdk_module().Exporter(exporter)
    return to_sink(session, sink, service_name=service_name, batch=batch)


def to_json_file(
    session: Session,
    path: str | os.PathLike[str],
    *,
    service_name: str = "ray",
    batch: int = BATCH,
) -> SpanCounts:
    """Every span of ``session`` written to an OTLP JSON file (one request a line)."""
    return to_sink(session, JsonFile(path), service_name=service_name, batch=batch)


def endpoint_sink(
    endpoint: str, protocol: str, headers: dict[str, str], timeout_s: float = 10.0
) -> Sink:
    """The sink for an OTLP endpoint spoken to in ``protocol`` (one of :data:`PROTOCOLS`).

    Raises:
        InvalidValueError: An unknown protocol, or an endpoint that is not a URL.
        MissingExtraError: The packages the protocol needs are not installed.
    """
    if protocol == "grpc":
        return sdk_module().grpc_exporter(endpoint, headers, timeout_s)  # type: ignore[no-any-return]
    if protocol not in PROTOCOLS:
        msg = f"--protocol {protocol!r}: use one of {', '.join(PROTOCOLS)}"
        raise InvalidValueError(msg)
    encoding = "json" if protocol == "http/json" else "protobuf"
    return Http(endpoint, headers, encoding=encoding, timeout_s=timeout_s)

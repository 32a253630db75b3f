"""A real OTLP/HTTP receiver for the tests: ``http.server`` on 127.0.0.1, any free port.

It decodes what it is sent as a collector does (``ExportTraceServiceRequest``, protobuf
with opentelemetry-proto, or OTLP JSON), keeps every span, and answers as it is told
(``answers``: the statuses of the next requests; then 200).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Received:
    """One span as the receiver decoded it, with its process's resource attributes."""

    span: Any  # opentelemetry.proto.trace.v1.trace_pb2.Span
    resource: dict[str, Any]

    @property
    def attributes(self) -> dict[str, Any]:
        return values(self.span.attributes)


def values(pairs: Any) -> dict[str, Any]:
    """KeyValues as a dict of Python values."""
    found = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        found[pair.key] = getattr(pair.value, kind) if kind else None
    return found


@dataclass
class Receiver:
    """The server's state: what it got, and how it answers."""

    answers: list[int] = field(default_factory=list)  # -N: 200, saying N spans were rejected
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    spans: list[Received] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, path: str, kind: str, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            self.requests.append((path, kind, headers))
            if self.answers:
                return self.answers.pop(0)
            if "json" in kind:
                request = ExportTraceServiceRequest()
                json_format.Parse(hex_to_base64(body.decode()), request)
            else:
                request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                resource = values(resource_spans.resource.attributes)
                for scope in resource_spans.scope_spans:
                    self.spans.extend(Received(span, resource) for span in scope.spans)
            return 200

    def wait_for(self, count: int, deadline_s: float = 60.0) -> list[Received]:
        """The spans, once there are at least ``count`` (or the deadline passed)."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            with self.lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.1)
        with self.lock:
            return list(self.spans)


def json_values(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """OTLP JSON KeyValues as Python values (int64s are strings in JSON)."""
    found = {}
    for pair in pairs:
        ((kind, value),) = pair["value"].items()
        found[pair["key"]] = int(value) if kind == "intValue" else value
    return found


def hex_to_base64(text: str) -> str:
    """OTLP JSON (hex ids) as protobuf's JSON mapping reads it (base64 bytes)."""

    def convert(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode()
                if k in {"traceId", "spanId", "parentSpanId"}
                else convert(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [convert(v) for v in node]
        return node

    return json.dumps(convert(json.loads(text)))


def receiver() -> Iterator[Receiver]:
    """Run a receiver until the generator is closed (for a fixture)."""
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status = state.take(
                self.path,
                self.headers.get("Content-Type", ""),
                {k.lower(): v for k, v in self.headers.items()},
                body,
            )
            payload = b"" if status == 200 else b"receiver says no"
            if status < 0:  # a partial success: accepted, some spans rejected
                answer = ExportTraceServiceResponse()
                answer.partial_success.rejected_spans = -status
                answer.partial_success.error_message = "spans too old"
                status, payload = 200, answer.SerializeToString()
            self.send_response(status)
            if status == 503:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()

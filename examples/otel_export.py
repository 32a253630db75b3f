"""Send a run's call tree to a tracing backend, as OpenTelemetry traces.

A request handler fans out to three fetches (one fails, and is retried by Ray until it
gives up) and a parse, on a local Ray it starts itself. Then the run is exported three
ways, with nothing leaving this machine:

1. ``raytrace-kit export otlp --endpoint URL``: OTLP/HTTP to a tiny receiver started
   here on 127.0.0.1 (a collector, Jaeger, Tempo or Honeycomb take the same requests);
   it decodes what it gets with opentelemetry-proto and prints the tree.
2. ``raytrace-kit export otlp-json -o FILE``: the OTLP JSON file, for backends that
   import files (the OpenTelemetry Collector's otlpjsonfile receiver).
3. ``Session.to_otel(exporter)``: any OpenTelemetry SDK span exporter; here the SDK's
   in-memory one.

Needs the otel extra: pip install 'raytrace_kit[otel]'.
Run: python examples/otel_export.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import ray
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import raytrace_kit
from raytrace_kit import debuggable, get_logger


@debuggable
@ray.remote(max_retries=1, retry_exceptions=True)
def fetch(url: str) -> str:
    if "broken" in url:
        msg = f"{url}: connection reset"
        raise ConnectionError(msg)
    return f"<page {url}>"


@debuggable
@ray.remote
def parse(pages: list[str]) -> int:
    return sum(len(page) for page in pages)


@debuggable
@ray.remote
def handle_request(urls: list[str]) -> int:
    get_logger().info("request.received", urls=len(urls))
    pages = []
    for ref in [fetch.remote(url) for url in urls]:
        try:
            pages.append(ray.get(ref))
        except ConnectionError:
            get_logger().warning("fetch.skipped")
    return ray.get(parse.remote(pages))


def receiver() -> tuple[ThreadingHTTPServer, list[tuple[str, object]]]:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps each span with its service's name."""
    received: list[tuple[str, object]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    received.extend((self.path, span) for span in scope_spans.spans)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, received


def print_tree(spans: list, parent: bytes = b"", depth: int = 0) -> None:
    """Each span under its parent: name, attempt, duration, status."""
    for span in sorted(spans, key=lambda s: s.start_time_unix_nano):
        if span.parent_span_id != parent:
            continue
        took = (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
        attempt = next(a.value.int_value for a in span.attributes if a.key == "ray.attempt")
        status = f"  ERROR {span.status.message}" if span.status.code == 2 else ""
        print(f"  {'  ' * depth}{span.name} (attempt {attempt})  {took:.1f} ms{status}")
        print_tree(spans, span.span_id, depth + 1)


def main() -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        print("parsed", ray.get(handle_request.remote(["a.example", "broken.example", "c"])))
        run = raytrace_kit.log_dir().parents[1]  # the session: <temp dir>/<session>/logs/...
    finally:
        ray.shutdown()

    # 1. OTLP/HTTP, to a receiver on this machine, by the command line.
    server, received = receiver()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    command = [sys.executable, "-m", "raytrace_kit", "export", "otlp", str(run), "--endpoint", url]
    done = subprocess.run(  # noqa: S603 -- this interpreter, our own arguments
        command, capture_output=True, text=True, check=True
    )
    print(f"\n$ raytrace-kit export otlp {run.name} --endpoint {url}\n{done.stdout}")
    server.shutdown()
    print("The receiver got, at", received[0][0])
    print_tree([span for _, span in received])
    failed = next(span for _, span in received if span.status.code == 2)
    print("\nA failed fetch's exception event:")
    for attribute in failed.events[0].attributes:
        print(f"  {attribute.key}: {attribute.value.string_value.splitlines()[-1]}")

    # 2. The OTLP JSON file.
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp, "traces.jsonl")
        done = subprocess.run(  # noqa: S603 -- this interpreter, our own arguments
            [sys.executable, "-m", "raytrace_kit", "export", "otlp-json", str(run), "-o",
             str(target), "--quiet"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        print(f"\n$ raytrace-kit export otlp-json -o traces.jsonl\n{done.stdout}")
        print(target.read_text()[:300], "...")

    # 3. Any SDK exporter: the spans as the SDK's own objects.
    exporter = InMemorySpanExporter()
    count = raytrace_kit.open_session(run).to_otel(exporter)
    print(f"\nSession.to_otel(): {count} spans")
    for span in exporter.get_finished_spans():
        attempt = span.attributes["ray.attempt"]
        print(f"  {span.name:32} attempt {attempt}  {span.status.status_code.name}")


if __name__ == "__main__":
    main()

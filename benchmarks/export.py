"""Exporting a run as OpenTelemetry spans: time and peak memory, side by side (issue 25).

A session shaped like a real pipeline's (benchmarks/real_session.py: 16 processes on 2
nodes, parents and children across processes, failures with tracebacks, retries, calls
that never ended) of --calls calls (500,000 calls is 1,000,000 events, about 630 MB) is
written once. With --submits, each task's submission is recorded too (a ``call.submit``
line per first attempt, in a driver's file: 1.5 M events), as the kit will write them.
Each variant then runs in a fresh process (peak memory is per process: the highest of the
rounds is shown), in rotating order, --rounds times; its wall time and its own CPU time
are measured (CPU time holds steadier when other work shares the machine):

  read calls          the floor: every call read and joined, no span made
  otlp-json           raytrace-kit export otlp-json: spans to an OTLP JSON file
  otlp-json (again)   the same, measured apart: the noise floor
  otlp http/protobuf  raytrace-kit export otlp: POSTs to a local receiver (another process
                      that reads each request and answers 200, as a collector's front does)
  to_otel (SDK)       Session.to_otel() to an SDK exporter that drops the spans: what
                      building the SDK's span objects costs
  SDK OTLP exporter   Session.to_otel(OTLPSpanExporter(...)) to the same receiver: the
                      design not taken (SDK span objects, then the SDK's own encoding);
                      needs opentelemetry-exporter-otlp-proto-http, left out without it

Target (issue 25): exporting 1,000,000 events streams, at most 256 MB peak.

Run: python benchmarks/export.py [--calls 500000] [--rounds 3] [--submits]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _harness import cache_bytecode
from real_session import write_real_session

VARIANTS = {
    "read calls": """
from raytrace_kit._reports.reading.calls import distinct_processes, iter_calls
n = sum(1 for files in distinct_processes(session.files) for _ in iter_calls(files))
""",
    "otlp-json": """
from raytrace_kit._reports.otel import export
n = export.to_json_file(session, OUT).spans
""",
    "otlp-json (again)": """
from raytrace_kit._reports.otel import export
n = export.to_json_file(session, OUT).spans
""",
    "otlp http/protobuf": """
from raytrace_kit._reports.otel import export
from raytrace_kit._reports.otel.stream import SpanCounts, session_spans
sink = export.endpoint_sink(URL, "http/protobuf", {})
n = export.send(session_spans(session, counts=SpanCounts()), sink).spans
""",
    "to_otel (SDK)": """
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
class Drop(SpanExporter):
    def export(self, spans):
        return SpanExportResult.SUCCESS
n = session.to_otel(Drop())
""",
    "SDK OTLP exporter": """
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
n = session.to_otel(OTLPSpanExporter(endpoint=URL))
""",
}

# Imports happen before the clock starts.
_TIMED = """
import resource, sys, time
import raytrace_kit
PATH, OUT, URL = sys.argv[1:4]
session = raytrace_kit.open_session(PATH)
def cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime
start, started = time.perf_counter(), cpu()
{body}
seconds, cpu_s = time.perf_counter() - start, cpu() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(seconds, cpu_s, peak, n)
"""

# The receiver: reads each request whole and answers 200 with an empty body.
_RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def add_submissions(directory: Path) -> int:
    """A ``call.submit`` line per first attempt, 1 ms before its start, in a driver's file.

    Written as the kit writes them (``_output.submissions.submit_line``), by one driver.
    """
    import msgspec  # noqa: PLC0415

    from raytrace_kit._output import submissions  # noqa: PLC0415
    from raytrace_kit._process import ProcessIdentity  # noqa: PLC0415
    from raytrace_kit._reports.otel.spans import nanoseconds  # noqa: PLC0415

    class Start(msgspec.Struct):
        timestamp: str = ""
        function: str = ""
        task_id: str | None = None
        attempt: int | None = None
        parent_call_id: str | None = None
        parent_task_id: str | None = None

    decode = msgspec.json.Decoder(Start).decode
    driver = ProcessIdentity("01000000", "dd" * 28, "ee" * 28, 999, is_worker=False)
    written = 0
    with (directory / f"events-{'dd' * 6}-999.jsonl").open("wb") as out:
        for path in sorted(directory.glob("events-*.jsonl")):
            if path.name.endswith("-999.jsonl"):
                continue
            with path.open("rb") as handle:
                for raw in handle:
                    if b'"event":"call.start"' not in raw[:120]:
                        continue
                    start = decode(raw)
                    if start.attempt:
                        continue
                    at = (nanoseconds(start.timestamp) - 1_000_000) / 1e9
                    prefix = submissions.submit_prefix(start.function, "task", {"CPU": 1.0}, None)
                    parent = (
                        f"{start.parent_call_id}/{start.parent_task_id or ''}"
                        if start.parent_call_id
                        else None
                    )
                    out.write(
                        submissions.submit_line(
                            at, prefix, start.task_id, None, parent, driver, "etl.py:40", None
                        )
                    )
                    written += 1
    return written


def main() -> None:
    cache_bytecode()  # new processes keep their bytecode (see _harness)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--submits", action="store_true", help="record each task's submission")
    parser.add_argument("--only", nargs="*", help="run only these variants")
    args = parser.parse_args()
    variants = {k: v for k, v in VARIANTS.items() if not args.only or k in args.only}
    if importlib.util.find_spec("opentelemetry.exporter.otlp.proto.http") is None:
        variants.pop("SDK OTLP exporter", None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session"
        path.mkdir()
        write_real_session(path, args.calls, submits=False)  # --submits adds its own
        submitted = add_submissions(path) if args.submits else 0
        lines = sum(sum(1 for _ in f.open("rb")) for f in path.glob("*.jsonl"))
        size = sum(f.stat().st_size for f in path.iterdir())
        print(f"session: {lines:,} events ({submitted:,} call.submit), {size / 1e6:.0f} MB")
        receiver = subprocess.Popen(
            [sys.executable, "-c", _RECEIVER], stdout=subprocess.PIPE, text=True
        )
        assert receiver.stdout is not None
        url = f"http://127.0.0.1:{receiver.stdout.readline().strip()}/v1/traces"
        samples: dict[str, list[tuple[float, float, int, int]]] = {k: [] for k in variants}
        labels = list(variants)
        try:
            for round_no in range(args.rounds):
                shift = round_no % len(labels)
                for label in labels[shift:] + labels[:shift]:
                    code = _TIMED.format(body=textwrap.dedent(variants[label]))
                    out = subprocess.run(
                        [sys.executable, "-c", code, str(path), f"{tmp}/out.jsonl", url],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout.split()
                    samples[label].append((float(out[0]), float(out[1]), int(out[2]), int(out[3])))
        finally:
            receiver.terminate()
            receiver.wait()
    print(f"\nExport, median of {args.rounds} rounds, each in a fresh process")
    print("  (wall time, and the process's own CPU time: steadier on a shared machine)")
    if "otlp-json (again)" in samples and "otlp-json" in samples:
        for index, what in ((0, "wall"), (1, "CPU")):
            floor = statistics.median(v[index] for v in samples["otlp-json (again)"]) / (
                statistics.median(v[index] for v in samples["otlp-json"])
            )
            print(f"  noise floor, {what} (otlp-json again / otlp-json): {floor:.3f}")
    base = statistics.median(v[1] for v in samples[labels[0]])
    head = f"{'variant':<20} {'wall s':>7} {'CPU s':>7} {'peak MB':>8} {'spans':>9}"
    print(f"  {head} {'CPU vs ' + labels[0]:>19}")
    for label, values in samples.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        peak = max(v[2] for v in values) / 2**20
        spans = values[-1][3]
        print(f"  {label:<20} {wall:7.2f} {cpu:7.2f} {peak:8.0f} {spans:9,} {cpu / base:18.2f}x")


if __name__ == "__main__":
    main()

"""``raytrace-kit export otlp|otlp-json``: the calls as OpenTelemetry spans, sent or written.

The spans are made and sent by :mod:`raytrace_kit._reports.otel`; here are the command's
arguments, the endpoint and headers OpenTelemetry's environment variables give, and the
``--follow`` loop's sayings.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit.cli.common import EXIT_EMPTY, EXIT_FAILED, session

if TYPE_CHECKING:
    from raytrace_kit.cli.common import Commands

__all__ = ["add", "run"]

_GRPC_DEFAULT = "http://localhost:4317"


def add(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``export`` and its two destinations to the ``raytrace-kit`` command's subcommands."""
    export = commands.add_parser(
        "export",
        help="send the call tree to a tracing backend (OpenTelemetry)",
        description="Export every call as an OpenTelemetry span (one per execution; the "
        "tree of submissions as traces): to an OTLP endpoint, or to an OTLP JSON file.",
    )
    kinds = export.add_subparsers(dest="destination", required=True, metavar="DESTINATION")
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("source", nargs="?", default="latest", metavar="SOURCE")
    shared.add_argument(
        "--service-name", default="ray", help="the spans' service.name (default: ray)"
    )
    shared.add_argument(
        "--batch-size", type=int, default=512, help="spans per request (default: 512)"
    )
    otlp = kinds.add_parser(
        "otlp",
        parents=[common, shared],
        help="send to an OTLP endpoint (a collector, Jaeger, Tempo, Honeycomb...)",
        description="Send the spans to an OTLP endpoint: HTTP/protobuf by default.",
    )
    otlp.add_argument(
        "--endpoint",
        help="where to send: default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
        "$OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces, else http://localhost:4318/v1/traces "
        "(a URL without a path gets /v1/traces)",
    )
    otlp.add_argument(
        "--protocol",
        choices=["http/protobuf", "http/json", "grpc"],
        default=None,
        help="default $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf; grpc needs the "
        "package opentelemetry-exporter-otlp-proto-grpc",
    )
    otlp.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a header to send (an API key); repeatable; added to $OTEL_EXPORTER_OTLP_HEADERS",
    )
    otlp.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for an answer")
    otlp.add_argument(
        "--follow",
        action="store_true",
        help="keep going: send each call's span as it ends, until the run ends (or Ctrl-C); "
        "reads the files of this machine",
    )
    to_file = kinds.add_parser(
        "otlp-json",
        parents=[common, shared],
        help="write an OTLP JSON file (one export request a line)",
        description="Write the spans as an OTLP JSON file: one ExportTraceServiceRequest "
        "a line, as the OpenTelemetry Collector's otlpjsonfile receiver reads.",
    )
    to_file.add_argument("-o", "--output", type=Path, required=True, help="the file")
    export.set_defaults(handler=run)


def _headers(given: list[str]) -> dict[str, str]:
    """``OTEL_EXPORTER_OTLP_HEADERS`` (``k=v,k=v``), then each ``--header NAME=VALUE``."""
    from raytrace_kit.exceptions import InvalidValueError  # noqa: PLC0415

    pairs = [p for p in os.environ.get("OTEL_EXPORTER_OTLP_HEADERS", "").split(",") if p.strip()]
    headers: dict[str, str] = {}
    for pair in [*pairs, *given]:
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            msg = f"--header {name.strip()!r}...: give it as NAME=VALUE (the value is not shown)"
            raise InvalidValueError(msg)
        headers[name.strip()] = value.strip()
    return headers


def _endpoint(given: str | None, protocol: str) -> str:
    if given:
        return given
    if protocol == "grpc":
        return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _GRPC_DEFAULT
    traces = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if traces:
        return traces
    generic = os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if generic:
        return generic.rstrip("/") + "/v1/traces"
    return "http://localhost:4318/v1/traces"


def run(arguments: argparse.Namespace) -> int:
    """Run ``export``; return the exit code (errors the command line reports are raised)."""
    read = session(arguments, follow=getattr(arguments, "follow", False))
    from raytrace_kit._reports.otel import export  # noqa: PLC0415 -- not for --help
    from raytrace_kit.exceptions import MissingExtraError  # noqa: PLC0415

    started = time.monotonic()
    sink = None
    try:
        if arguments.destination == "otlp-json":
            counts = export.to_json_file(
                read,
                arguments.output,
                service_name=arguments.service_name,
                batch=arguments.batch_size,
            )
            where = f"written to {arguments.output}"
        else:
            protocol = arguments.protocol or os.environ.get(
                "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"
            )
            endpoint = _endpoint(arguments.endpoint, protocol)
            sink = export.endpoint_sink(
                endpoint, protocol, _headers(arguments.header), arguments.timeout
            )
            endpoint = getattr(sink, "url", endpoint)
            if arguments.follow:
                return _follow(arguments, read, sink, endpoint)
            counts = export.to_sink(
                read, sink, service_name=arguments.service_name, batch=arguments.batch_size
            )
            where = f"sent to {endpoint}"
    except MissingExtraError as exc:
        print(f"raytrace-kit export: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{counts}: {where} in {time.monotonic() - started:.1f} s")
    _rejected(sink)
    return 0 if counts.spans else EXIT_EMPTY


def _rejected(sink: Any) -> None:
    """Say on stderr how many spans the endpoint said it dropped (OTLP's partial success)."""
    rejected = getattr(sink, "rejected", 0)
    if rejected:
        print(
            f"raytrace-kit export: the endpoint accepted the requests but rejected {rejected} "
            "spans (a partial success): see its logs for why",
            file=sys.stderr,
        )


def _follow(arguments: argparse.Namespace, read: Any, sink: Any, where: str) -> int:
    """Send spans as calls end until the run ends or Ctrl-C; say each batch on stderr."""
    from raytrace_kit._reports.otel import follow, stream  # noqa: PLC0415
    from raytrace_kit._reports.reading import ray_processes  # noqa: PLC0415

    follower = follow.Follower(read, stream.resources(read, arguments.service_name))
    counts = stream.SpanCounts()
    session_dir = read.root if (read.root / "logs").is_dir() else None

    def live() -> bool:
        if session_dir is None:
            return True  # not a Ray session: followed until Ctrl-C
        found = ray_processes()
        return found is None or any(n.session_dir == session_dir for n in found)

    def deliver(spans: list[Any]) -> None:
        for start in range(0, len(spans), arguments.batch_size):
            batch = spans[start : start + arguments.batch_size]
            sink.send(batch)
            for span in batch:
                counts.add(span)
        if spans:
            print(f"raytrace-kit export: {counts.spans} spans sent", file=sys.stderr, flush=True)

    print(
        f"raytrace-kit export: following {follower.directory}, sending to {where} (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        follow.follow(follower, deliver, live, time.sleep)
    finally:
        sink.close()
    counts.running = follower.running
    print(f"{counts}: sent to {where}")
    _rejected(sink)
    return 0

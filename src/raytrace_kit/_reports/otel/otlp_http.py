"""Sending spans to an OTLP/HTTP endpoint: one POST per batch, with urllib.

The request is protobuf (``application/x-protobuf``, the encoding every OTLP receiver
takes) or OTLP's JSON (``application/json``). Retryable answers (429, 502, 503, 504, a
reset connection) are tried again after a pause that grows (or the endpoint's
``Retry-After``), as OTLP/HTTP's specification asks; any other failure stops the export
with an :class:`~raytrace_kit.exceptions.ExportError` that says what to change.
Headers (an API key) are sent, never printed.
"""

from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

import msgspec

from raytrace_kit._reports.otel.spans import Span
from raytrace_kit.exceptions import ExportError, InvalidValueError, MissingExtraError

__all__ = [
    "DEFAULT_ENDPOINT",
    "EXTRA",
    "Http",
    "endpoint_url",
    "http_error",
    "json_encoder",
    "proto_encoder",
    "unreachable",
]

DEFAULT_ENDPOINT = "http://localhost:4318/v1/traces"  # OTLP/HTTP's own default
_TRACES_PATH = "/v1/traces"
_RETRYABLE = {429, 502, 503, 504}
_TRIES = 5
_FIRST_PAUSE_S = 0.5
_LONGEST_PAUSE_S = 8.0
_BODY_CHARS = 300

EXTRA = "pip install 'raytrace_kit[otel]'"


def endpoint_url(given: str) -> str:
    """The URL spans are posted to: ``given``, with ``/v1/traces`` if it has no path.

    Raises:
        InvalidValueError: ``given`` is not an http(s) URL.
    """
    parsed = urllib.parse.urlsplit(given)
    if parsed.scheme not in {"http", "https"} or not parsed.netloc:
        msg = (
            f"--endpoint {given!r} is not an http:// or https:// URL: give the OTLP/HTTP "
            f"address of your collector or backend, for example {DEFAULT_ENDPOINT}"
        )
        raise InvalidValueError(msg)
    if parsed.path in {"", "/"}:
        parsed = parsed._replace(path=_TRACES_PATH)
    return urllib.parse.urlunsplit(parsed)


def proto_encoder() -> Callable[[list[Span]], bytes]:
    """Spans to an ``ExportTraceServiceRequest``'s bytes (needs opentelemetry-proto).

    Raises:
        MissingExtraError: opentelemetry-proto is not installed.
    """
    try:
        from raytrace_kit._reports.otel import otlp_proto  # noqa: PLC0415 -- the extra
    except ImportError as exc:
        msg = (
            "sending spans as OTLP/HTTP protobuf needs the OpenTelemetry protocol package "
            f"({exc.name or 'opentelemetry-proto'} is missing): {EXTRA}. Without it, "
            "`raytrace-kit export otlp --protocol http/json` sends OTLP's JSON encoding, and "
            "`raytrace-kit export otlp-json -o FILE` writes a file."
        )
        raise MissingExtraError(msg) from exc
    return lambda spans: otlp_proto.request(spans).SerializeToString()


def json_encoder() -> Callable[[list[Span]], bytes]:
    """Spans to an ``ExportTraceServiceRequest`` in OTLP's JSON encoding."""
    from raytrace_kit._reports.otel import otlp_json  # noqa: PLC0415

    return otlp_json.Encoder().encode


class Http:
    """A sink posting each batch of spans to an OTLP/HTTP endpoint.

    Args:
        url: The endpoint (see :func:`endpoint_url`).
        headers: Extra headers (an API key the backend wants).
        encoding: ``"protobuf"`` or ``"json"``.
        timeout_s: How long to wait for one answer.
    """

    def __init__(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        *,
        encoding: str = "protobuf",
        timeout_s: float = 10.0,
    ) -> None:
        self.url = endpoint_url(url)
        self.encode = proto_encoder() if encoding == "protobuf" else json_encoder()
        kind = "application/x-protobuf" if encoding == "protobuf" else "application/json"
        self.headers = {**(headers or {}), "Content-Type": kind}
        self.timeout_s = timeout_s
        self.rejected = 0  # spans the endpoint said it dropped (a partial success)

    def send(self, spans: list[Span]) -> None:
        """Post one batch, trying again while the endpoint says it is busy.

        Raises:
            ExportError: The endpoint refused the batch, failed, or did not answer.
        """
        body = self.encode(spans)
        pause = _FIRST_PAUSE_S
        for attempt in range(1, _TRIES + 1):
            try:
                self._post(body)
            except _Retry as retry:
                if attempt == _TRIES:
                    raise retry.error from None
                time.sleep(min(retry.after if retry.after is not None else pause, 30.0))
                pause = min(pause * 2, _LONGEST_PAUSE_S)
            else:
                return

    def _post(self, body: bytes) -> None:
        request = urllib.request.Request(  # noqa: S310 -- http(s) only: endpoint_url()
            self.url, data=body, headers=self.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:  # noqa: S310
                self._partial(answer.read(), answer.headers.get("Content-Type", ""))
        except urllib.error.HTTPError as exc:
            error = http_error(self.url, exc.code, exc.read()[:4096])
            if exc.code in _RETRYABLE:
                raise _Retry(error, _retry_after(exc.headers.get("Retry-After"))) from None
            raise error from None
        except urllib.error.URLError as exc:
            raise unreachable(self.url, exc.reason) from None
        except (ConnectionResetError, http.client.RemoteDisconnected) as exc:
            raise _Retry(unreachable(self.url, exc), None) from None
        except TimeoutError as exc:
            raise unreachable(self.url, exc) from None

    def _partial(self, body: bytes, kind: str) -> None:
        """Count what a 200 answer says it rejected (OTLP's partial success)."""
        if not body:
            return
        if "json" in kind:
            try:
                found = msgspec.json.decode(body)
                rejected = int(found.get("partialSuccess", {}).get("rejectedSpans", 0))
            except (msgspec.DecodeError, AttributeError, ValueError, TypeError):
                return
        else:
            try:
                from raytrace_kit._reports.otel import otlp_proto  # noqa: PLC0415

                answer = otlp_proto.ExportTraceServiceResponse.FromString(body)
                rejected = answer.partial_success.rejected_spans
            except Exception:
                return
        self.rejected += rejected

    def close(self) -> None:
        """Nothing to release: each batch is its own request."""


class _Retry(Exception):  # noqa: N818 -- not an error: a reason to try again
    def __init__(self, error: ExportError, after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.after = after


def _retry_after(value: str | None) -> float | None:
    try:
        return max(float(value), 0.0) if value else None
    except ValueError:
        return None


def unreachable(url: str, reason: object) -> ExportError:
    """The error for an endpoint that did not answer: refused, unknown, timed out."""
    if isinstance(reason, ConnectionRefusedError):
        fix = (
            "nothing listens there (connection refused). Start your collector or backend, "
            "or pass --endpoint with its address (an OpenTelemetry Collector's OTLP/HTTP "
            "receiver listens on port 4318; 4317 is its gRPC port: --protocol grpc)"
        )
    elif isinstance(reason, TimeoutError) or "timed out" in str(reason):
        fix = (
            "it did not answer in time. Check that --endpoint is the OTLP/HTTP address of "
            "your collector and that a firewall lets this machine reach it"
        )
    else:
        fix = (
            f"it cannot be reached ({type(reason).__name__}: {reason}). Check the host and "
            "port in --endpoint"
        )
    return ExportError(f"could not send spans to {url}: {fix}.")


_FIXES = {
    400: "it could not read the spans: is --endpoint an OTLP/HTTP traces endpoint?",
    401: "it wants credentials: pass the header your backend asks for with --header "
    "NAME=VALUE (for example --header 'x-honeycomb-team=YOUR_KEY')",
    403: "it refused these credentials: check the key passed with --header",
    404: "no traces endpoint at that path: OTLP/HTTP takes traces at /v1/traces "
    "(for example http://localhost:4318/v1/traces)",
    405: "that address does not take OTLP: OTLP/HTTP takes traces at /v1/traces",
    413: "the batch is too large for it: pass a smaller --batch-size",
    415: "it does not take this encoding: try --protocol http/json (or http/protobuf)",
}


def http_error(url: str, status: int, body: bytes) -> ExportError:
    """The error for an endpoint that answered with an HTTP error status."""
    said = body.decode("utf-8", "replace").strip().replace("\n", " ")[:_BODY_CHARS]
    if status in _RETRYABLE:
        fix = (
            f"it is overloaded or unavailable, and still was after {_TRIES} tries: check "
            "its health and logs, and try again"
        )
    elif status >= 500:
        fix = "it failed while taking the spans: see its logs"
    else:
        fix = _FIXES.get(status, "it refused the spans: see its logs for why")
    detail = f" It said: {said}" if said else ""
    return ExportError(f"{url} answered HTTP {status}: {fix}.{detail}", status)

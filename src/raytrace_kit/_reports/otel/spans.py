"""One call's records as one span: ids, times, attributes, events, status.

Nothing here imports OpenTelemetry: a :class:`Span` is plain data that the OTLP encoders
(:mod:`.otlp_json`, :mod:`.otlp_proto`) and the SDK bridge (:mod:`.sdk`) each render.
:func:`span_of` is the whole mapping, from one :class:`Call` (its ``call.start`` and
``call.end`` joined) and the lines it logged; a reader of another kind (a node-side one)
can build spans with it as calls end.

Ids are derived, never drawn, so exporting a run twice gives the same spans (docs/otel.md):

- span id: the call id (16 hex digits: 8 bytes, as a span id is); another id's SHA-256.
- trace id: the first 16 bytes of the SHA-256 of the trace's *key*: the task id of the
  root call (the call submitted from the driver's own code, whose ``parent_call_id`` is
  null), which all its attempts share, or its call id where it has no task id.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timedelta, timezone
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import msgspec

from raytrace_kit._output.schema import Call

__all__ = [
    "ERROR",
    "EVENT_LIMIT",
    "SCOPE",
    "SCOPE_VERSION",
    "UNSET",
    "Interruption",
    "Resource",
    "Resources",
    "Span",
    "SpanEvent",
    "log_event",
    "nanoseconds",
    "span_id",
    "span_of",
    "trace_id",
]

# The instrumentation scope the spans come from: this library, as OTLP names it.
SCOPE = "raytrace_kit"
try:
    SCOPE_VERSION = version("raytrace_kit")
except PackageNotFoundError:  # run from a source tree
    SCOPE_VERSION = "0+unknown"
UNSET, ERROR = 0, 2  # OTLP's Status.StatusCode values (OK is for the program to say)
EVENT_LIMIT = 128  # span events kept per span, as OpenTelemetry's SDKs keep by default

# One process's attributes (service, pid, Ray ids): shared by its spans, OTLP's "resource".
Resource = tuple[tuple[str, Any], ...]
Value = str | int | float | bool


class SpanEvent(msgspec.Struct, gc=False):
    """An event on a span: a ``get_logger()`` event of the call, or its exception."""

    name: str
    time_ns: int
    attributes: dict[str, Value]


class Span(msgspec.Struct, gc=False):
    """One execution as a span, ready for an OTLP encoder (times in ns since the epoch)."""

    trace_id: bytes
    span_id: bytes
    parent_span_id: bytes  # b"" for a trace's root
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Value]
    events: list[SpanEvent]
    status_code: int
    status_message: str
    resource: Resource
    dropped_events: int = 0


class Interruption(msgspec.Struct, frozen=True):
    """How a call without an end is closed: when its process was last heard of, and why."""

    last_ns: int
    cause: str = ""


def span_id(call_id: str) -> bytes:
    """The span id of a call: its call id's 8 bytes (or, for another id, 8 of its hash)."""
    if len(call_id) == 16:
        try:
            made = bytes.fromhex(call_id)
        except ValueError:
            pass
        else:
            if any(made):
                return made
    return hashlib.sha256(call_id.encode()).digest()[:8]


def trace_id(key: str) -> bytes:
    """The trace id of a trace whose key (its root's task id) is ``key``: 16 bytes of hash."""
    return hashlib.sha256(key.encode()).digest()[:16]


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def nanoseconds(stamp: str) -> int:
    """An event's ISO 8601 timestamp as integer nanoseconds since the epoch (exact).

    Naive times are UTC, as the kit writes its own.

    Raises:
        ValueError: ``stamp`` is not an ISO 8601 time.
    """
    if stamp.endswith("Z"):  # another writer's UTC (Python 3.10 reads only +00:00)
        stamp = stamp[:-1] + "+00:00"
    moment = datetime.fromisoformat(stamp)  # the C parser: as fast as any cache of it
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return ((moment - _EPOCH) // _MICROSECOND) * 1000


def _time(stamp: str | None, otherwise: int) -> int:
    """:func:`nanoseconds` of a call's time; ``otherwise`` where it has none it can read."""
    try:
        return nanoseconds(stamp) if stamp else otherwise
    except ValueError:
        return otherwise


# A call's own fields: on its span already, left out of its events' attributes.
_CALL_FIELDS = frozenset(
    {
        "timestamp", "event", "schema", "call_id", "parent_call_id", "parent_task_id",
        "function", "kind", "mode", "task_id", "task_name", "actor_id", "job_id", "node_id",
        "worker_id", "pid", "attempt",
    }
)  # fmt: skip
_LOG = msgspec.json.Decoder()
_JSON = msgspec.json.Encoder()


def _value(value: Any) -> Value | None:
    """An attribute value OTLP takes: scalars as they are, anything else as its JSON."""
    if value is None:
        return None
    if isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    try:
        return _JSON.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)


def log_event(raw: bytes) -> SpanEvent | None:
    """A ``get_logger()`` line of a call as a span event (``None``: not a JSON object)."""
    try:
        item = _LOG.decode(raw)
        if not isinstance(item, dict):
            return None
        at = nanoseconds(str(item.get("timestamp", "")))
    except (msgspec.DecodeError, ValueError, IndexError):
        return None
    attributes = {
        key: shown
        for key, value in item.items()
        if key not in _CALL_FIELDS and (shown := _value(value)) is not None
    }
    return SpanEvent(str(item.get("event", "log")), at, attributes)


class Resources:
    """The resource of each process (service, host, pid, Ray ids): one shared tuple each.

    Args:
        service_name: Every resource's ``service.name``.
        hosts: The ``host.name`` of each node, by node id, where known.
        host: The ``host.name`` of the nodes ``hosts`` does not name, if known.
    """

    def __init__(
        self,
        service_name: str = "ray",
        hosts: dict[str, str] | None = None,
        host: str | None = None,
    ) -> None:
        self.service_name = service_name
        self.hosts = hosts or {}
        self.host = host
        self._made: dict[tuple[Any, ...], Resource] = {}

    def of(self, call: Call) -> Resource:
        """The resource of the process that ran ``call``."""
        key = (call.pid, call.node_id, call.worker_id, call.job_id)
        found = self._made.get(key)
        if found is None:
            attributes: dict[str, Any] = {"service.name": self.service_name}
            for name, value in (
                ("host.name", self.hosts.get(call.node_id or "", self.host)),
                ("process.pid", call.pid),
                ("ray.node_id", call.node_id),
                ("ray.worker_id", call.worker_id),
                ("ray.job_id", call.job_id),
            ):
                if value is not None:
                    attributes[name] = value
            found = self._made[key] = tuple(attributes.items())
        return found


def _attributes(call: Call, queue_s: float | None) -> dict[str, Value]:
    namespace, _, short = call.function.rpartition(".")
    found: dict[str, Any] = {
        "code.function.name": call.function,
        "code.function": short,
        "code.namespace": namespace,
        "ray.call_id": call.call_id,
        "ray.call.kind": call.kind,
        "ray.call.mode": call.mode,
        "ray.call.status": call.status,
        "ray.task_id": call.task_id,
        "ray.task_name": call.task_name,
        "ray.actor_id": call.actor_id,
        "ray.attempt": call.attempt,
        "ray.parent_task_id": call.parent_task_id,
        "ray.queue_time_s": queue_s,
        "ray.cpu_s": call.cpu_s,
        "ray.process_cpu_s": call.process_cpu_s,
        "ray.memory.rss_start_bytes": call.rss_start_bytes,
        "ray.memory.rss_end_bytes": call.rss_end_bytes,
        "ray.memory.rss_growth_bytes": call.rss_growth_bytes,
        "ray.memory.rss_minus_shr_end_bytes": call.rss_minus_shr_end_bytes,
        "ray.memory.max_rss_bytes": call.max_rss_bytes,
        "ray.profile_path": call.profile_path,
        "error.type": call.error_type,
    }
    return {key: value for key, value in found.items() if value is not None}


def span_of(
    call: Call,
    trace_key: str,
    *,
    resources: Resources,
    logged: list[bytes] | tuple[bytes, ...] = (),
    dropped: int = 0,
    queue_s: float | None = None,
    interruption: Interruption | None = None,
) -> Span:
    """The span of one execution.

    Args:
        call: The call, its ``call.start`` and ``call.end`` joined (``status`` is
            ``"interrupted"`` when it has no end: ``interruption`` then says how it ends).
        trace_key: Its trace's key (:func:`trace_id`): the root call's task id.
        resources: Where its process's resource comes from.
        logged: The lines the call logged (``get_logger()``), in order, at most
            :data:`EVENT_LIMIT`; ``dropped`` says how many more there were.
        dropped: How many of its lines were left out.
        queue_s: How long the task waited between its submission and its first start.
        interruption: For a call without an end: the last time its process was heard of
            (the span ends there), and what Ray recorded of its death.

    Returns:
        The span: status ERROR with an ``exception`` event for a failed call, ERROR for an
        interrupted one, UNSET (OpenTelemetry's "no error") otherwise.
    """
    start = _time(call.started, 0)
    events = [event for raw in logged if (event := log_event(raw)) is not None]
    code, message = UNSET, ""
    if interruption is not None:
        end = max(start, interruption.last_ns)
        code = ERROR
        message = "interrupted: its process ended during the call (no call.end)" + (
            f"; {interruption.cause}" if interruption.cause else ""
        )
    else:
        end = _time(call.ended, start)
    if call.status == "error":
        code = ERROR
        message = f"{call.error_type}: {call.error}" if call.error else str(call.error_type)
        exception: dict[str, Value] = {"exception.type": call.error_type or "Exception"}
        if call.error is not None:
            exception["exception.message"] = call.error
        if call.traceback:
            exception["exception.stacktrace"] = call.traceback
        events.append(SpanEvent("exception", end, exception))
    return Span(
        trace_id=trace_id(trace_key),
        span_id=span_id(call.call_id),
        parent_span_id=span_id(call.parent_call_id) if call.parent_call_id else b"",
        name=call.function or "call",
        start_ns=start,
        end_ns=end,
        attributes=_attributes(call, queue_s),
        events=events,
        status_code=code,
        status_message=message,
        resource=resources.of(call),
        dropped_events=dropped,
    )

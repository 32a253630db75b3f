"""The event pipeline: structlog processors, the JSON Lines writer, and reading events back.

Library events (``call.start``, ``call.end``) and the user's own ``get_logger()`` events
go through the same processors and the same per-process file, so they share one schema.
"""

from __future__ import annotations

import contextvars
import itertools
import json
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterable, MutableMapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import structlog
from structlog.typing import FilteringBoundLogger, Processor, WrappedLogger

from raytrace_kit import _identity, _paths, _state
from raytrace_kit.exceptions import RaytraceKitWarning

__all__ = [
    "CURRENT_CALL",
    "ActiveCall",
    "EventWriter",
    "emit",
    "emit_call",
    "encode_members",
    "get_logger",
    "read_events",
    "report_failure",
    "spec_fragment",
]


class ActiveCall:
    """The instrumented call running in this thread or coroutine.

    Ray ids are captured by :meth:`capture` in the thread that runs the call: at once
    when call events are written, otherwise on the first ``get_logger()`` event, so a
    call with ``log=False`` pays only for this object.

    Attributes:
        owner: ``id()`` of the actor instance running the call, ``None`` for tasks.
        started: ``time.perf_counter()`` at the start of the call.
        fragment: The call's JSON members shared by ``call.start`` and ``call.end``.
    """

    __slots__ = (
        "_fields",
        "actor_id",
        "attempt",
        "call_id",
        "fragment",
        "identity",
        "local_actor_id",
        "mode",
        "owner",
        "spec_fields",
        "spec_fragment",
        "started",
        "task_id",
    )

    def __init__(
        self,
        spec_fields: dict[str, str],
        spec_fragment: str,
        mode: str,
        owner: int | None,
        local_actor_id: str | None = None,
    ) -> None:
        self.local_actor_id = local_actor_id
        self.spec_fields = spec_fields
        self.spec_fragment = spec_fragment
        self.mode = mode
        self.owner = owner
        self.started = time.perf_counter()
        self.call_id: str | None = None
        self.fragment = ""
        self._fields: dict[str, Any] | None = None

    def capture(self) -> None:
        """Read the Ray ids of the running task and render the shared JSON members."""
        self.call_id = _new_call_id()
        identity = self.identity = _identity.process_identity()
        if self.mode != "local":  # "ray", or "pinned" (a Ray actor task)
            self.task_id, self.actor_id, self.attempt = _identity.call_ids()
        else:  # local mode: no Ray task behind the call
            self.task_id, self.actor_id, self.attempt = None, self.local_actor_id, 0
        # Ids are hex strings and numbers: safe to place in JSON without escaping.
        self.fragment = (
            f'"call_id":"{self.call_id}",{self.spec_fragment},"mode":"{self.mode}",'
            f'"task_id":{_quoted(self.task_id)},"actor_id":{_quoted(self.actor_id)},'
            f"{_identity_fragment(identity)},"
            f'"attempt":{"null" if self.attempt is None else int(self.attempt)}'
        )

    @property
    def fields(self) -> dict[str, Any]:
        """The call's fields as a dict (what ``get_logger()`` events carry)."""
        if self._fields is None:
            if self.call_id is None:
                self.capture()
            identity = self.identity
            self._fields = {
                "call_id": self.call_id,
                **self.spec_fields,
                "mode": self.mode,
                "task_id": self.task_id,
                "actor_id": self.actor_id,
                "job_id": identity.job_id,
                "node_id": identity.node_id,
                "worker_id": identity.worker_id,
                "pid": identity.pid,
                "attempt": self.attempt,
            }
        return self._fields


_id_pid = -1
_id_prefix = ""
_id_counter = itertools.count()


def _new_call_id() -> str:
    """A 16-hex-digit id, unique across processes and nodes: random prefix + counter.

    The prefix is drawn from the OS once per process (again after a fork), so the ids of
    a process are distinct from those of every other process with near certainty.
    """
    global _id_pid, _id_prefix
    pid = os.getpid()
    if pid != _id_pid:
        _id_prefix, _id_pid = os.urandom(5).hex(), pid
    return f"{_id_prefix}{next(_id_counter) & 0xFFFFFF:06x}"


def _quoted(value: str | None) -> str:
    return "null" if value is None else f'"{value}"'


_identity_cache: tuple[_identity.ProcessIdentity, str] | None = None


def _identity_fragment(identity: _identity.ProcessIdentity) -> str:
    global _identity_cache  # noqa: PLW0603 -- one rendering per process identity
    cached = _identity_cache
    if cached is not None and cached[0] is identity:
        return cached[1]
    fragment = (
        f'"job_id":{_quoted(identity.job_id)},"node_id":{_quoted(identity.node_id)},'
        f'"worker_id":{_quoted(identity.worker_id)},"pid":{identity.pid}'
    )
    _identity_cache = (identity, fragment)
    return fragment


# The worker sets it around every call; get_logger() events pick the fields up from here.
CURRENT_CALL: contextvars.ContextVar[ActiveCall | None] = contextvars.ContextVar(
    "raytrace_kit_current_call", default=None
)

_FIRST_KEYS = ("timestamp", "level", "event")


class EventWriter:
    """Appends complete lines to one JSON Lines file.

    Each line goes to the kernel in one ``os.write`` on an ``O_APPEND`` descriptor, under a
    lock: it is on disk for every reader as soon as :meth:`write` returns (a SIGKILL of this
    process loses nothing already written), and lines from concurrent threads never
    interleave.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._pid = -1
        self._lock = threading.Lock()

    def write(self, line: bytes) -> None:
        """Append ``line`` (which ends in a newline).

        Raises:
            OSError: The file cannot be opened or written.
        """
        with self._lock:
            pid = os.getpid()
            if self._fd is None or self._pid != pid:
                # After a fork the child reopens: sharing the parent's file would put two
                # processes' events in a file named after one pid.
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(
                    self.path,
                    os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                    0o644,
                )
                self._pid = pid
            written = os.write(self._fd, line)
            if written != len(line):  # a short write: only on signals or a full disk
                view = memoryview(line)[written:]
                while view:
                    view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """Close the file; a later :meth:`write` reopens it."""
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                os.close(self._fd)
            self._fd = None


_worker_writer: EventWriter | None = None


def _writer(identity: _identity.ProcessIdentity | None = None) -> EventWriter:
    """Return the event file of this process, for the current session.

    A driver resolves its file once per identity (per Ray connection): the directory and
    ``RAYTRACE_LOG_DIR`` are read then, not for every event.
    """
    global _worker_writer  # noqa: PLW0603 -- per-process cache for the worker hot path
    writer = _worker_writer
    if writer is not None and writer._pid in (-1, os.getpid()):
        return writer
    if identity is None:
        identity = _identity.process_identity()
    state = _state.state
    cached = state.driver_writer
    if cached is not None and cached[0] is identity:
        return cached[1]
    path = _paths.log_dir() / _paths.event_file_name(identity.node_id, identity.pid)
    writer = state.writers.get(path)
    if writer is None:
        with _state.lock:
            writer = state.writers.setdefault(path, EventWriter(path))
    if identity.is_worker:
        # A worker belongs to one session for life: resolve its file once.
        _worker_writer = writer
    else:
        state.driver_writer = (identity, writer)
    return writer


def report_failure(key: str, what: str, exc: BaseException) -> None:
    """Report an instrumentation failure once per process: a warning and a stderr event.

    The event goes to stderr because the failure is usually that the event file cannot be
    written; in a Ray worker, stderr lands in the worker's log in the session directory.
    """
    state = _state.state
    if key in state.warned:
        return
    state.warned.add(key)
    message = f"raytrace_kit: {what} ({type(exc).__name__}: {exc}); the call goes on."
    try:
        record = {
            "timestamp": _now(),
            "level": "warning",
            "event": "instrumentation.error",
            "what": what,
            "error_type": type(exc).__name__,
            "error": str(exc),
            "pid": os.getpid(),
        }
        sys.stderr.write(json.dumps(record) + "\n")
        warnings.warn(message, RaytraceKitWarning, stacklevel=3)
    except RaytraceKitWarning:
        raise  # a test or user turned our warnings into errors: honour that
    except Exception:  # noqa: S110 -- reporting must never break the call
        pass


# --- processors (structlog's protocol: (logger, method_name, event_dict) -> event_dict) ---


_second = -1
_second_text = ""


def _now() -> str:
    """ISO 8601 UTC with microseconds, fixed width, so timestamps sort as strings.

    Equal to ``datetime.now(timezone.utc).isoformat(timespec="microseconds")``; the
    date-time part is formatted once per second (this runs twice per call).
    """
    global _second, _second_text
    now = time.time()
    second = int(now)
    if second != _second:
        text = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        _second, _second_text = second, text
    return f"{_second_text}.{int((now - second) * 1e6):06d}+00:00"


def _add_context(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Add the current call's fields, or this process's ids outside of calls."""
    call = CURRENT_CALL.get()
    if call is None:
        identity = _identity.process_identity()
        context: dict[str, Any] = {
            "job_id": identity.job_id,
            "node_id": identity.node_id,
            "worker_id": identity.worker_id,
            "pid": identity.pid,
        }
    else:
        context = dict(call.fields)
    context.update(event_dict)  # what the user bound or passed wins
    return context


def _add_level(
    _logger: WrappedLogger, method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    if "level" not in event_dict:
        event_dict["level"] = "warning" if method == "warn" else method
    return event_dict


def _add_timestamp(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    event_dict["timestamp"] = _now()
    return event_dict


# One encoder for the process: json.dumps() with options builds a new one per call.
_ENCODER = json.JSONEncoder(default=repr, ensure_ascii=False, separators=(",", ":"))


def _to_json_line(
    _logger: WrappedLogger, _method: str, event_dict: MutableMapping[str, Any]
) -> bytes:
    ordered = {key: event_dict.pop(key, None) for key in _FIRST_KEYS}
    ordered.update(event_dict)
    return _ENCODER.encode(ordered).encode("utf-8", "backslashreplace") + b"\n"


def spec_fragment(fields: dict[str, str]) -> str:
    """Render the JSON members fixed for one instrumented callable (done once)."""
    return _ENCODER.encode(fields)[1:-1]


_PROCESSORS: tuple[Processor, ...] = (
    _add_context,
    _add_level,
    _add_timestamp,
    structlog.processors.format_exc_info,
    _to_json_line,
)


class _FileSink:
    """The logger at the end of our structlog chain: writes rendered lines to the file."""

    def msg(self, line: bytes) -> None:
        try:
            _writer().write(line)
        except Exception as exc:
            report_failure("write-events", "cannot write the event file", exc)

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


_SINK = _FileSink()
# Typed Any: structlog types the class it returns as the FilteringBoundLogger protocol,
# whose constructor takes no arguments.
_BoundLogger: Any = structlog.make_filtering_bound_logger(logging.NOTSET)


def get_logger(**bound: Any) -> FilteringBoundLogger:
    """Return a structlog logger whose events land in raytrace_kit's event files.

    Inside an instrumented call, every event carries that call's fields (``call_id``,
    ``function``, ``task_id``, ``actor_id``, ...) and goes to the file of the worker that
    runs it. Elsewhere (the driver, a notebook) events carry this process's Ray ids and go
    to this process's file in :func:`raytrace_kit.log_dir`.

    The logger uses its own processor chain: it neither reads nor changes
    ``structlog.configure()`` or the ``logging`` configuration of the program.

    Args:
        **bound: Key-value pairs added to every event of this logger.

    Returns:
        A structlog bound logger (``info``, ``warning``, ``error``, ``exception``, ``bind``...).

    Example:
        >>> log = get_logger(stage="load")
        >>> log.info("batch.loaded", rows=128)
    """
    logger: FilteringBoundLogger = _BoundLogger(_SINK, list(_PROCESSORS), {})
    return logger.bind(**bound) if bound else logger


def emit(event: str, level: str, fields: dict[str, Any]) -> None:
    """Write one library event through the same renderer as ``get_logger()`` events."""
    try:
        fields["event"] = event
        fields["level"] = level
        fields["timestamp"] = _now()
        _writer().write(_to_json_line(None, level, fields))
    except Exception as exc:
        report_failure("write-events", "cannot write the event file", exc)


def encode_members(fields: dict[str, Any]) -> str:
    """Render ``fields`` as JSON object members (no braces), e.g. for :func:`emit_call`."""
    return _ENCODER.encode(fields)[1:-1]


def emit_call(event: str, level: str, call: ActiveCall, tail: str = "") -> None:
    """Write ``call.start`` / ``call.end`` (the hot path: pre-rendered members).

    The line has the same shape and field order as :func:`emit` would give for
    ``call.fields`` plus the members in ``tail`` (which starts with a comma); only the
    rendering is cached.
    """
    try:
        line = (
            f'{{"timestamp":"{_now()}","level":"{level}","event":"{event}",'
            f"{call.fragment}{tail}}}\n"
        )
        _writer(call.identity).write(line.encode("utf-8", "backslashreplace"))
    except Exception as exc:
        report_failure("write-events", "cannot write the event file", exc)


def read_events(path: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Parse raytrace_kit event files into a list of dicts, sorted by time.

    Args:
        path: An event file, or a directory searched recursively for ``events-*.jsonl``.
            Defaults to :func:`raytrace_kit.log_dir` (this node's files for the current
            session; on a single machine that includes every node of a local cluster).

    Returns:
        Every event, oldest first. A truncated last line (a process killed while writing)
        is skipped, and so is any line that is not a JSON object.
    """
    root = Path(path) if path is not None else _paths.log_dir()
    files: Iterable[Path] = [root] if root.is_file() else sorted(root.rglob("events-*.jsonl"))
    events: list[dict[str, Any]] = []
    for file in files:
        try:
            data = file.read_bytes()
        except OSError:
            continue  # removed or unreadable while we listed: nothing to report
        for line in data.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
    events.sort(key=lambda event: str(event.get("timestamp", "")))
    return events

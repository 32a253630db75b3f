"""Writes rendered event lines to this process's event file, and reports when it cannot.

Library events (``call.start``, ``call.end``...) and the user's ``get_logger()`` events go
to the same per-process file, so they share one schema (see :mod:`.schema`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from raytrace_kit import _process
from raytrace_kit._output import paths, schema
from raytrace_kit._output.context import ActiveCall
from raytrace_kit.exceptions import RaytraceKitWarning

__all__ = ["EventWriter", "emit", "emit_call", "report_failure", "write_line"]


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
        self._lock = threading.Lock()

    def write(self, line: bytes) -> None:
        """Append ``line`` (which ends in a newline).

        Raises:
            OSError: The file cannot be opened or written.
        """
        with self._lock:
            fd = self._fd
            if fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = self._fd = os.open(
                    self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644
                )
            written = os.write(fd, line)
            if written != len(line):  # a short write: only on signals or a full disk
                view = memoryview(line)[written:]
                while view:
                    view = view[os.write(fd, view) :]

    def close(self) -> None:
        """Close the file; a later :meth:`write` reopens it."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def forget(self) -> None:
        """In a forked child: close this process's copy of the descriptor, never reuse it."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self.close()


def _writer(identity: _process.ProcessIdentity | None = None) -> EventWriter:
    """Return the event file of this process, for the current session.

    A worker resolves its file once for life; a driver once per identity (per Ray
    connection): the directory and ``RAYTRACE_LOG_DIR`` are read then, not per event.
    """
    state = _process.state
    writer = state.worker_writer
    if writer is not None:
        return writer
    if identity is None:
        identity = _process.process_identity()
    cached = state.driver_writer
    if cached is not None and cached[0] is identity:
        return cached[1]
    path = paths.log_dir() / paths.event_file_name(identity.node_id, identity.pid)
    writer = state.writers.get(path)
    if writer is None:
        with state.lock:
            writer = state.writers.setdefault(path, EventWriter(path))
    if identity.is_worker:
        state.worker_writer = writer
    else:
        state.driver_writer = (identity, writer)
    return writer


def write_line(line: bytes, identity: _process.ProcessIdentity | None = None) -> None:
    """Append a rendered line to this process's file; report (once) if that fails."""
    try:
        _writer(identity).write(line)
    except Exception as exc:
        report_failure("write-events", "cannot write the event file", exc)


def emit(event: str, level: str, fields: dict[str, Any]) -> None:
    """Write one library event (not ``call.*``): ``fields`` plus the first keys."""
    try:
        fields["event"] = event
        fields["level"] = level
        fields["timestamp"] = schema.now()
        line = schema.event_line(fields)
    except Exception as exc:
        report_failure("write-events", "cannot render an event", exc)
        return
    write_line(line)


def emit_call(event: str, level: str, call: ActiveCall, tail: str = "") -> None:
    """Write ``call.start`` / ``call.end`` (the hot path: pre-rendered members)."""
    write_line(schema.call_line(event, level, call.fragment, tail), call.identity)


def report_failure(key: str, what: str, exc: BaseException) -> None:
    """Report an instrumentation failure once per process: a warning and a stderr event.

    The event goes to stderr because the failure is usually that the event file cannot be
    written; in a Ray worker, stderr lands in the worker's log in the session directory.
    """
    state = _process.state
    if key in state.warned:
        return
    state.warned.add(key)
    message = f"raytrace_kit: {what} ({type(exc).__name__}: {exc}); the call goes on."
    try:
        sys.stderr.write(schema.failure_record(what, exc))
        warnings.warn(message, RaytraceKitWarning, stacklevel=3)
    except RaytraceKitWarning:
        raise  # a test or user turned our warnings into errors: honour that
    except Exception:  # noqa: S110 -- reporting must never break the call
        pass

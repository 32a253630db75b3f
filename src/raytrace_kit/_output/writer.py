"""Writes rendered event lines to this process's event file, and reports when it cannot.

Library events (``call.start``, ``call.end``...) and the user's ``get_logger()`` events go
to the same per-process file, so they share one schema (rendered by :mod:`.encode`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from raytrace_kit import _process
from raytrace_kit._output import encode, paths, submit_lines
from raytrace_kit._output import state as output_state
from raytrace_kit._output.context import ActiveCall
from raytrace_kit.exceptions import RaytraceKitWarning

__all__ = [
    "EventWriter",
    "emit",
    "emit_call",
    "emit_line",
    "report_failure",
    "rotation_limits",
    "warn",
    "write_line",
]

# A deleted or replaced event file is noticed within this many seconds.
_CHECK_SECONDS = 1.0
_state = output_state.state  # never rebound: its reset clears it in place
_clock, _write = time.monotonic, os.write  # once a line: no module lookup
_OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)


def rotation_limits() -> tuple[int, int]:
    """``(max bytes per file, backups kept)``: the kit's variables, else Ray's, else Ray's defaults.

    ``RAYTRACE_ROTATION_MAX_BYTES`` / ``RAYTRACE_ROTATION_BACKUP_COUNT`` win over Ray's own
    ``RAY_ROTATION_MAX_BYTES`` / ``RAY_ROTATION_BACKUP_COUNT`` (512 MiB and 5 by default,
    as for Ray's logs). A max of 0 turns rotation off.
    """
    size = os.environ.get("RAYTRACE_ROTATION_MAX_BYTES") or os.environ.get(
        "RAY_ROTATION_MAX_BYTES", str(512 * 1024 * 1024)
    )
    count = os.environ.get("RAYTRACE_ROTATION_BACKUP_COUNT") or os.environ.get(
        "RAY_ROTATION_BACKUP_COUNT", "5"
    )
    try:
        return max(int(size), 0), max(int(count), 1)
    except ValueError:
        return 512 * 1024 * 1024, 5


class EventWriter:
    """Appends complete lines to one JSON Lines file.

    Each line goes to the kernel in one ``os.write`` on an ``O_APPEND`` descriptor, under a
    lock: it is on disk for every reader as soon as :meth:`write` returns (a SIGKILL of this
    process loses nothing already written), and lines from concurrent threads never
    interleave. Beyond that:

    - a line cut short (disk full) is never continued by the next one, which starts on a
      fresh line, so a reader loses only the cut line;
    - a deleted or replaced file (a log cleaner, ``rm -rf`` of the log dir) is noticed
      within a second and recreated, with a warning and an ``events.reopened`` event;
    - the file rotates at a size limit (:func:`rotation_limits`): ``events-X.jsonl``
      becomes ``events-X.1.jsonl``, the older ones shift, the oldest is dropped;
    - symbolic links are not followed (``O_NOFOLLOW``), descriptors do not leak into
      child processes (``O_CLOEXEC``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._identity: tuple[int, int] = (0, 0)  # (st_dev, st_ino) of the open file
        self._size = 0
        self._check_at = 0.0  # time.monotonic() of the next look for a deleted file
        self._cut = False  # the last line was cut short: start the next on a fresh line
        self._limits = rotation_limits()
        # Bytes the file may reach before it rotates: one comparison a line (inf: never).
        self._room = float(self._limits[0] or "inf")
        self._reopened = ""  # why the file was recreated, to report once the lock is free

    def write(self, line: bytes) -> None:
        """Append ``line`` (which ends in a newline).

        Raises:
            OSError: The file cannot be opened or written (the line may be cut short).
        """
        with self._lock:
            fd, size = self._fd, len(line)
            # One test for all that is seldom due: open, look for a deleted file, fence
            # off a cut line, rotate.
            if (
                fd is None
                or self._cut
                or self._size + size > self._room
                or _clock() >= self._check_at
            ):
                fd, line = self._ready(fd, line)
                size = len(line)
            # Raising, os.write wrote nothing: there is no part of the line to fence off.
            written = _write(fd, line)  # all of it, but for a full disk or a signal
            self._size += written
            if written < size:
                self._append(fd, line, written)
            self._cut = False
        if self._reopened:  # outside the lock: a warnings hook may log through us
            reason, self._reopened = self._reopened, ""
            report_failure(
                f"reopened:{self.path}",
                f"the event file {self.path} was {reason}; a new one was started",
                FileNotFoundError(errno.ENOENT, reason, str(self.path)),
            )

    def _ready(self, fd: int | None, line: bytes) -> tuple[int, bytes]:
        """The descriptor to write ``line`` to, and the line: opened, checked, rotated."""
        if fd is None:
            fd = self._open()
        else:
            now = time.monotonic()
            if now >= self._check_at:
                self._check_at = now + _CHECK_SECONDS
                fd = self._reopen_if_gone(fd)
        if self._cut:
            line = b"\n" + line
        if self._size + len(line) > self._room and self._size:
            fd = self._rotate(fd)
        return fd, line

    def _append(self, fd: int, line: bytes, written: int) -> None:
        """``line`` from its byte ``written`` on (after a short write, or all of it)."""
        view = memoryview(line)[written:]
        try:
            while view:
                written = os.write(fd, view)
                self._size += written
                view = view[written:]
        except OSError:
            # Nothing of a line is written, or part of it: only the part must be fenced off.
            self._cut = len(view) < len(line) or self._cut
            raise
        self._cut = False

    def _open(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, _OPEN_FLAGS, 0o600)  # for this user: messages may be private
        info = os.fstat(fd)
        self._fd, self._identity, self._size = fd, (info.st_dev, info.st_ino), info.st_size
        self._check_at = time.monotonic() + _CHECK_SECONDS
        # A file that does not end in a newline was cut short (by this or another process).
        self._cut = info.st_size > 0 and _last_byte(fd, info.st_size) != b"\n"
        return fd

    def _reopen_if_gone(self, fd: int) -> int:
        try:
            info = os.stat(self.path, follow_symlinks=False)
            if (info.st_dev, info.st_ino) == self._identity:
                return fd
            reason = "replaced"
        except FileNotFoundError:
            reason = "deleted"
        self._close()
        fd = self._open()
        self._reopened = reason
        line = encode.event_line(
            {
                "timestamp": encode.now(),
                "level": "warning",
                "event": "events.reopened",
                "reason": reason,
                "pid": os.getpid(),
            }
        )
        self._append(fd, line, 0)
        return fd

    def _rotate(self, fd: int) -> int:
        _max_bytes, backups = self._limits
        self._close()
        stem = self.path.name.removesuffix(".jsonl")
        for number in range(backups, 0, -1):
            older = self.path.with_name(f"{stem}.{number}.jsonl")
            newer = self.path if number == 1 else self.path.with_name(f"{stem}.{number - 1}.jsonl")
            with contextlib.suppress(FileNotFoundError):
                os.replace(newer, older)
        return self._open()

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def close(self) -> None:
        """Close the file; a later :meth:`write` reopens it."""
        with self._lock:
            self._close()

    def forget(self) -> None:
        """In a forked child: close this process's copy of the descriptor, never reuse it."""
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._close()


def _last_byte(fd: int, size: int) -> bytes:
    try:
        return os.pread(fd, 1, size - 1)
    except OSError:
        return b"\n"


def _writer(identity: _process.ProcessIdentity | None = None) -> EventWriter:
    """Return the event file of this process, for the current session.

    A worker resolves its file once for life; a driver once per identity (per Ray
    connection): the directory and ``RAYTRACE_LOG_DIR`` are read then, not per event. A
    driver's file of an earlier connection is closed then (one per ``ray.init``).
    """
    state = output_state.state
    writer = state.worker_writer
    if writer is not None:
        return writer
    if identity is None:
        identity = _process.process_identity()
    cached = state.driver_writer
    if cached is not None and cached[0] is identity:
        return cached[1]
    directory = paths.log_dir()
    last = output_state.state.last_ray_log_dir
    if _left_session(identity) and last is not None:
        # Records of a Ray session this driver has left (ray.shutdown(), then written by
        # the kit's thread or at exit): to that session's directory, where they belong.
        directory = last
    path = directory / paths.event_file_name(identity.node_id, identity.pid)
    writer = state.writers.get(path)
    if writer is None:
        with state.lock:
            writer = state.writers.setdefault(path, EventWriter(path))
    if identity.is_worker:
        state.worker_writer = writer
    else:
        if cached is not None and cached[1] is not writer:
            cached[1].close()  # the previous session's file: ray.shutdown() came before
        state.driver_writer = (identity, writer)
    return writer


def _left_session(identity: _process.ProcessIdentity) -> bool:
    """Whether ``identity`` is of a Ray connection this process has closed.

    Local mode's own ids (Ray down) are of no session: their records go where
    :func:`~raytrace_kit._output.paths.log_dir` says, as a reader looks.
    """
    if identity.node_id is None or identity is _process.state.local_identity:
        return False
    return not ray_connected(identity)


def ray_connected(identity: _process.ProcessIdentity) -> bool:
    """Whether ``identity`` is this process's identity now (its Ray connection is open)."""
    return _process.process_identity() is identity


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
        fields["timestamp"] = encode.now()
        line = encode.event_line(fields)
    except Exception as exc:
        report_failure("write-events", "cannot render an event", exc)
        return
    write_line(line)


def emit_call(event: str, level: str, call: ActiveCall, tail: str = "") -> None:
    """Write an event of ``call`` (``call.stuck``, ``call.blocked``): its members, then ``tail``."""
    # A call whose ids were never captured has no identity: this process's file then.
    emit_line(encode.call_line(event, level, call.fragment, tail), getattr(call, "identity", None))


def emit_line(line: bytes, identity: _process.ProcessIdentity | None) -> None:
    """Write a call's rendered line (the hot path: ``call.start``, ``call.end``).

    Submission records waiting to be written go first, in the same write.
    """
    state = _state
    if state.submissions:
        line = submit_lines.rendered(identity) + line
    try:
        writer = state.worker_writer
        if writer is None:  # a driver: its file of this identity, as _writer() keeps it
            cached = state.driver_writer
            writer = (
                cached[1] if cached is not None and cached[0] is identity else _writer(identity)
            )
        writer.write(line)
    except Exception as exc:
        report_failure("write-events", "cannot write the event file", exc)


def report_failure(key: str, what: str, exc: BaseException) -> None:
    """Report an instrumentation failure once per process: a warning and a stderr event.

    The event goes to stderr because the failure is usually that the event file cannot be
    written; in a Ray worker, stderr lands in the worker's log in the session directory.
    """
    state = output_state.state
    unusable = _unusable_log_dir(exc)
    if unusable is not None:  # one report for all it stops: files, stacks, profiles
        key, what = unusable
    if key in state.warned:
        return
    state.warned.add(key)
    with contextlib.suppress(Exception):  # reporting must never break the call
        sys.stderr.write(encode.failure_record(what, exc))
    detail = f"{type(exc).__name__}: {encode.safe_str(exc)}"
    warn(f"raytrace_kit: {what} ({detail}); the call goes on.", stacklevel=4)


def _unusable_log_dir(exc: BaseException) -> tuple[str, str] | None:
    """``(key, what)`` when ``exc`` comes of a log directory that cannot be written in.

    Everything the kit writes lives there: each part that fails on it would report the
    same cause under its own name. This names the directory, why, what is off, and the fix.
    """
    name = getattr(exc, "filename", None)
    if not isinstance(exc, OSError) or not name:
        return None
    with contextlib.suppress(Exception):
        directory = paths.log_dir()
        if not Path(name).is_relative_to(directory):
            return None
        if directory.is_dir() and os.access(directory, os.W_OK | os.X_OK):
            return None  # the directory is fine: the failure is of the one file
        if directory.exists() and not directory.is_dir():
            why = "it is a file, not a directory"
        elif directory.exists():
            why = "this user cannot write in it (read-only, or another user's)"
        else:
            why = "it cannot be created"
        fix = (
            f"set {paths.ENV_LOG_DIR} to a directory this user can write"
            if os.environ.get(paths.ENV_LOG_DIR)
            else "check the Ray session's directory (Ray's temp dir) can be written"
        )
        what = (
            f"cannot write in its log directory {directory} ({why}): no event file, no live "
            f"stacks and no profiles in this process ({fix})"
        )
        return f"log-dir:{directory}", what
    return None


def warn(message: str, stacklevel: int = 3) -> None:
    """Issue a :class:`RaytraceKitWarning` that never breaks the program, with one exception.

    Warnings turned into errors in general (``PYTHONWARNINGS=error``, ``-W error``) do not
    make the kit raise into the user's code: its promise is that the call goes on. A filter
    that names ``RaytraceKitWarning`` itself (``-W error::raytrace_kit.RaytraceKitWarning``,
    as the kit's own tests use) asked for exactly this, and is honoured: the warning is
    raised.
    """
    try:
        warnings.warn(message, RaytraceKitWarning, stacklevel=stacklevel)
    except RaytraceKitWarning:
        if _errors_asked_for():
            raise
    except Exception:  # noqa: S110 -- a broken warnings filter must not break the call
        pass


def _errors_asked_for() -> bool:
    """Whether the first filter matching our warnings turns them, by name, into errors."""
    for action, _message, category, _module, _lineno in warnings.filters:
        if isinstance(category, type) and issubclass(RaytraceKitWarning, category):
            return action == "error" and issubclass(category, RaytraceKitWarning)
    return False

"""Live stacks: every thread's Python frames, served by a small thread of the kit's own.

Each debuggable actor (and each pinned function's runner) starts, in its ``__init__``, one
daemon thread that never runs user code: it blocks reading a named pipe (FIFO) in this
node's log dir, mode 0600, and answers each request with the stacks of every other thread
(``sys._current_frames``) plus the instrumented calls they are running. A node-local
helper task (:func:`read_stacks`) writes the request and reads the answer.

Why this design: it changes nothing in the actor's own threads (no concurrency group,
which would move methods off the main thread), installs no signal handler, opens no
network port, and answers while the actor is blocked in Python or in C code that releases
the GIL (``time.sleep``, a lock, a socket read). A call that holds the GIL for seconds in
C code delays the answer until it lets go.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import html
import json
import os
import stat
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from raytrace_kit import _process
from raytrace_kit._html import card, cell_name, pre
from raytrace_kit._output import paths, writer

__all__ = [
    "NoStacksServerError",
    "ProcessStacks",
    "RunningCall",
    "ThreadStack",
    "process_stacks",
    "read_stacks",
    "serve",
]

# Frames from these directories are hidden unless all frames are asked for.
_HIDDEN_DIRS = (
    str(Path(ray.__file__).parent) + os.sep,
    str(Path(__file__).parents[1]) + os.sep,  # raytrace_kit
)
# A thread with no frame outside these (and no instrumented call) is Ray's or Python's own
# (Ray's GC and log threads...): left out unless all frames are asked for.
_STDLIB_DIR = str(Path(threading.__file__).parent) + os.sep


def _is_system(filename: str) -> bool:
    if filename.startswith(_HIDDEN_DIRS):
        return True
    return filename.startswith(_STDLIB_DIR) and "-packages" not in filename


@dataclass(frozen=True, slots=True)
class RunningCall:
    """An instrumented call running in a thread when the stacks were taken.

    Attributes:
        call_id: The call's id, as in its events.
        function: The qualified name of the function or method.
        task_id: Ray's task id (``None`` in local mode).
        running_s: Seconds since the call started.
    """

    call_id: str | None
    function: str
    task_id: str | None
    running_s: float


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """The Python stack of one thread, outermost frame first.

    Attributes:
        name: The thread's name.
        ident: The thread's identifier.
        frames: ``(filename, line number, function, source line)`` per frame: the user's
            frames only, unless all frames were asked for.
        calls: The instrumented calls this thread is running (an async actor's event loop
            thread can run several at once).
        hidden: How many frames of Ray and raytrace_kit were left out.
    """

    name: str
    ident: int
    frames: tuple[tuple[str, int, str, str], ...]
    calls: tuple[RunningCall, ...] = ()
    hidden: int = 0

    def functions(self) -> list[str]:
        """The function names of the frames, outermost first."""
        return [frame[2] for frame in self.frames]


@dataclass(frozen=True, slots=True)
class ProcessStacks:
    """The stacks of every thread of one process, at one moment.

    Attributes:
        pid: The process.
        node_id: Its node.
        threads: One :class:`ThreadStack` per thread (the kit's own server thread
            excluded; by default also threads that run only Ray's and Python's code).
        hidden_threads: How many threads were left out for that.
    """

    pid: int
    node_id: str | None
    threads: tuple[ThreadStack, ...]
    hidden_threads: int = 0

    def __str__(self) -> str:
        lines = [f"Python stacks of pid {self.pid} on node {self.node_id}"]
        if self.hidden_threads:
            lines.append(
                f"({self.hidden_threads} threads of Ray and Python hidden; all_frames=True "
                "shows them)"
            )
        for thread in self.threads:
            lines.append(f'\nThread "{thread.name}" ({thread.ident}), most recent call last:')
            for call in thread.calls:
                lines.append(
                    f"  running {call.function} for {call.running_s:.1f}s "
                    f"(call {call.call_id}, task {call.task_id})"
                )
            if thread.hidden:
                lines.append(f"  ({thread.hidden} frames of Ray and raytrace_kit hidden)")
            lines.extend(_frame_lines(thread))
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """IPython's text display: the readable ``str()``, not the fields."""
        printer.text(str(self))

    def _repr_html_(self) -> str:
        parts = []
        for thread in self.threads:
            running = "; ".join(
                f"running {c.function} for {c.running_s:.1f}s (call {c.call_id})"
                for c in thread.calls
            )
            hidden = f" ({thread.hidden} frames of Ray and raytrace_kit hidden)" * bool(
                thread.hidden
            )
            title = f"Thread {thread.name!r}{': ' + running if running else ''}{hidden}"
            parts.append(f"<div>{html.escape(title)}</div>")
            parts.append(pre("\n".join(_frame_lines(thread)) or "(no Python frames)"))
        summary = (
            f"pid {self.pid} on node {(self.node_id or '?')[:12]}, {len(self.threads)} thread(s)"
        )
        if self.hidden_threads:
            summary += f"; {self.hidden_threads} of Ray and Python hidden (all_frames=True)"
        return card("Python stacks", summary, *parts)

    def find(self, function: str) -> ThreadStack | None:
        """The first thread whose stack contains a frame of ``function``."""
        return next((t for t in self.threads if function in t.functions()), None)


def _frame_lines(thread: ThreadStack) -> list[str]:
    """A thread's frames as Python prints a traceback, most recent last (cells as In [n])."""
    lines = []
    for filename, lineno, function, source in thread.frames:
        cell = cell_name(filename)
        place = f"Cell {cell}" if cell is not None else f'File "{filename}"'
        lines.append(f"  {place}, line {lineno}, in {function}")
        if source:
            lines.append(f"    {source}")
    return lines


def process_stacks(all_frames: bool = False, *, include_caller: bool = False) -> ProcessStacks:
    """The stacks of every thread of this process, now.

    The calling thread is left out (it is the server answering) unless ``include_caller``.
    """
    names = {t.ident: t.name for t in threading.enumerate()}
    me = None if include_caller else threading.get_ident()
    now = time.perf_counter()
    calls: dict[int, list[RunningCall]] = {}
    for call in list(_process.state.running_calls.values()):
        running = RunningCall(
            call.call_id,
            call.spec_fields["function"],
            getattr(call, "task_id", None),  # set once the call is captured
            round(now - call.started, 3),
        )
        calls.setdefault(call.thread, []).append(running)
    threads = []
    hidden_threads = 0
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue  # the thread answering this request
        frames = [
            (f.filename, f.lineno or 0, f.name, f.line or "")
            for f in traceback.extract_stack(frame)
        ]
        shown = frames if all_frames else [f for f in frames if not f[0].startswith(_HIDDEN_DIRS)]
        system = all(_is_system(f[0]) for f in frames)
        if system and not all_frames and ident not in calls:
            hidden_threads += 1
            continue
        threads.append(
            ThreadStack(
                names.get(ident, f"thread-{ident}"),
                ident,
                tuple(shown),
                tuple(calls.get(ident, ())),
                len(frames) - len(shown),
            )
        )
    identity = _process.process_identity()
    return ProcessStacks(identity.pid, identity.node_id, tuple(threads), hidden_threads)


def _fifo_path(node_id: str | None, pid: int) -> Path:
    return paths.log_dir() / "stacks" / f"{(node_id or 'nonode')[:12]}-{pid}.fifo"


def serve() -> None:
    """Start this process's stacks server (once; later calls return at once).

    Failures (no FIFOs on this platform, an unwritable directory) leave the process
    without one: :func:`read_stacks` then says so.
    """
    state = _process.state
    if state.stacks_server is not None or not hasattr(os, "mkfifo"):
        return
    try:
        identity = _process.process_identity()
        fifo = _fifo_path(identity.node_id, identity.pid)
        with state.lock:
            if state.stacks_server is not None:  # started by another thread meanwhile
                return  # type: ignore[unreachable]
            fifo.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                fifo.unlink()  # left by an earlier process with this pid
            os.mkfifo(fifo, 0o600)
            # O_RDWR: the server is a writer too, so the pipe never reads end-of-file and
            # clients can always open it; no request falls between two opens.
            fd = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
            atexit.register(_unlink, fifo, identity.pid)  # a new process reuses the name
            thread = threading.Thread(
                target=_serve_forever,
                args=(fd, fifo.parent),
                name="raytrace_kit-stacks",
                daemon=True,
            )
            thread.start()
            state.stacks_server = thread
    except Exception as exc:  # the actor runs on without live stacks
        writer.report_failure("stacks-server", "cannot serve live stacks", exc)


def _unlink(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, which inherits atexit handlers
        with contextlib.suppress(OSError):
            path.unlink()


def _serve_forever(fd: int, directory: Path) -> None:
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)  # blocks until a client writes
        except OSError:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            with contextlib.suppress(Exception):  # a bad request never ends the server
                _answer(directory, json.loads(line))


def _answer(directory: Path, request: dict[str, Any]) -> None:
    reply = directory / Path(str(request["reply"])).name  # only ever in this directory
    stacks = process_stacks(all_frames=bool(request.get("all_frames")))
    partial = reply.with_suffix(".part")
    # 0600, like the FIFO: source lines of the frames are for this user only.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(partial, flags, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(_to_dict(stacks), out)
    partial.replace(reply)


def _to_dict(stacks: ProcessStacks) -> dict[str, Any]:
    return {
        "pid": stacks.pid,
        "node_id": stacks.node_id,
        "hidden_threads": stacks.hidden_threads,
        "threads": [
            {
                "name": t.name,
                "ident": t.ident,
                "frames": t.frames,
                "calls": [[c.call_id, c.function, c.task_id, c.running_s] for c in t.calls],
                "hidden": t.hidden,
            }
            for t in stacks.threads
        ],
    }


def _from_dict(data: dict[str, Any]) -> ProcessStacks:
    return ProcessStacks(
        data["pid"],
        data["node_id"],
        tuple(
            ThreadStack(
                t["name"],
                t["ident"],
                tuple(tuple(f) for f in t["frames"]),
                tuple(RunningCall(*c) for c in t["calls"]),
                t["hidden"],
            )
            for t in data["threads"]
        ),
        data.get("hidden_threads", 0),
    )


class NoStacksServerError(Exception):
    """The process serves no stacks (not a debuggable actor, or it is gone)."""


def read_stacks(node_id: str | None, pid: int, all_frames: bool, timeout: float) -> ProcessStacks:
    """Ask the stacks server of process ``pid`` on this node, and wait for the answer.

    Runs as a small task on the node of that process (it shares its log dir).

    Raises:
        NoStacksServerError: ``pid`` has no stacks server.
        TimeoutError: No answer within ``timeout`` seconds.
    """
    fifo = _fifo_path(node_id, pid)
    reply = fifo.parent / f"reply-{os.getpid()}-{os.urandom(4).hex()}.json"
    request = json.dumps({"reply": reply.name, "all_frames": all_frames}).encode() + b"\n"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if not stat.S_ISFIFO(fifo.stat().st_mode):
                raise NoStacksServerError(str(fifo))
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            break
        except FileNotFoundError:
            msg = f"process {pid} serves no stacks (no {fifo})"
            raise NoStacksServerError(msg) from None
        except OSError as exc:
            # ENXIO: the server is between two requests (or gone): try again shortly.
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                msg = f"process {pid} does not answer on {fifo}: {exc}"
                raise NoStacksServerError(msg) from exc
            time.sleep(0.01)
    try:
        os.write(fd, request)
    finally:
        os.close(fd)
    while not reply.exists():
        if time.monotonic() > deadline:
            msg = f"process {pid} did not answer within {timeout} s"
            raise TimeoutError(msg)
        time.sleep(0.005)
    try:
        return _from_dict(json.loads(reply.read_text()))
    finally:
        with contextlib.suppress(OSError):
            reply.unlink()

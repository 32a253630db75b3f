"""The stacks server: a kit thread answers stack requests over a FIFO; the client that asks.

Each debuggable actor (and each pinned function's runner) starts, in its ``__init__``, one
daemon thread that never runs user code: it blocks reading a named pipe (FIFO) in this
node's log dir, mode 0600, and answers each request with :func:`.stacks.process_stacks`.
A node-local helper task (:func:`read_stacks`) writes the request and reads the answer.

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
import json
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

from raytrace_kit import _process
from raytrace_kit._output import paths, writer
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker.stacks import ProcessStacks, RunningCall, ThreadStack, process_stacks

__all__ = ["NoStacksServerError", "read_stacks", "serve"]


def _fifo_path(node_id: str | None, pid: int) -> Path:
    return paths.log_dir() / "stacks" / f"{(node_id or 'nonode')[:12]}-{pid}.fifo"


def serve() -> None:
    """Start this process's stacks server (once; later calls return at once).

    Failures (no FIFOs on this platform, an unwritable directory) leave the process
    without one: :func:`read_stacks` then says so.
    """
    state = worker_state.state
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

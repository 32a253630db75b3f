"""The request pipe of each process: its FIFO, the answers, and the client that asks.

The kit's thread (:mod:`.watch`) of each process that runs or submits instrumented calls
blocks reading a named pipe (FIFO) in this node's log dir, mode 0600, and answers each
request: the live stacks (:func:`.stacks.process_stacks`), the snapshot ``stuck()``
reads (:mod:`.snapshot`) or what the process's refs hold (:mod:`.held`). A node-local
helper task (:func:`ask`) writes the request and reads the answer from a reply file
beside it.

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
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit import _process
from raytrace_kit._output import paths, writer

if TYPE_CHECKING:
    from raytrace_kit._worker.stacks import ProcessStacks

# What answers a request (stacks, snapshots, held refs) is imported at the first request,
# not here: every worker opens its FIFO at its first call, and few are ever asked.

__all__ = ["NoStacksServerError", "answer", "ask", "fifos", "open_fifo", "read_stacks"]


def _fifo_path(node_id: str | None, pid: int) -> Path:
    return paths.log_dir() / "stacks" / f"{(node_id or 'nonode')[:12]}-{pid}.fifo"


def open_fifo() -> tuple[int, Path] | None:
    """Make this process's request FIFO and open it: ``(descriptor, directory)``.

    ``None`` where it cannot be made (no FIFOs on this platform, an unwritable directory):
    the process then serves no stacks, and :func:`ask` says so. Never raises.
    """
    if not hasattr(os, "mkfifo"):
        return None
    try:
        identity = _process.process_identity()
        fifo = _fifo_path(identity.node_id, identity.pid)
        fifo.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            fifo.unlink()  # left by an earlier process with this pid
        os.mkfifo(fifo, 0o600)
        # O_RDWR: the server is a writer too, so the pipe never reads end-of-file and
        # clients can always open it; no request falls between two opens.
        fd = os.open(fifo, os.O_RDWR | os.O_CLOEXEC)
        atexit.register(_unlink, fifo, identity.pid)  # a new process reuses the name
    except Exception as exc:
        writer.report_failure("stacks-server", "cannot serve live stacks", exc)
        return None
    return fd, fifo.parent


def fifos() -> list[tuple[int, Path]]:
    """``(pid, path)`` of each request FIFO in this node's log dir (its process may be gone)."""
    found = []
    with contextlib.suppress(OSError):
        for path in (paths.log_dir() / "stacks").glob("*.fifo"):
            with contextlib.suppress(ValueError):
                found.append((int(path.stem.rpartition("-")[2]), path))
    return found


def _unlink(path: Path, pid: int) -> None:
    if os.getpid() == pid:  # not in a forked child, which inherits atexit handlers
        with contextlib.suppress(OSError):
            path.unlink()


def answer(directory: Path, request: dict[str, Any]) -> None:
    """Write the answer to one request into the reply file it names (in ``directory`` only)."""
    from raytrace_kit._worker import held  # noqa: PLC0415 -- see the imports above
    from raytrace_kit._worker.snapshot import snapshot  # noqa: PLC0415
    from raytrace_kit._worker.stacks import process_stacks  # noqa: PLC0415

    reply = directory / Path(str(request["reply"])).name  # only ever in this directory
    if request.get("kind") == "snapshot":
        answered: dict[str, Any] = snapshot()
    elif request.get("kind") == "held":  # raytrace-kit memory: what this process's refs hold
        answered = held.table()
    else:
        answered = _to_dict(process_stacks(all_frames=bool(request.get("all_frames"))))
    partial = reply.with_suffix(".part")
    # 0600, like the FIFO: source lines of the frames are for this user only.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(partial, flags, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(answered, out)
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
    from raytrace_kit._worker.stacks import (  # noqa: PLC0415 -- see the imports above
        ProcessStacks,
        RunningCall,
        ThreadStack,
    )

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
    answered = ask(_fifo_path(node_id, pid), {"all_frames": all_frames}, timeout)
    return _from_dict(answered)


def ask(fifo: Path, request: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Send ``request`` to the process serving ``fifo`` (on this node); return its answer.

    Raises:
        NoStacksServerError: No process serves ``fifo``.
        TimeoutError: No answer within ``timeout`` seconds.
    """
    pid = fifo.stem.rpartition("-")[2]
    reply = fifo.parent / f"reply-{os.getpid()}-{os.urandom(4).hex()}.json"
    line = json.dumps({**request, "reply": reply.name}).encode() + b"\n"
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
        os.write(fd, line)
    finally:
        os.close(fd)
    while not reply.exists():
        if time.monotonic() > deadline:
            msg = f"process {pid} did not answer within {timeout} s"
            raise TimeoutError(msg)
        time.sleep(0.005)
    try:
        answered: dict[str, Any] = json.loads(reply.read_text())
        return answered
    finally:
        with contextlib.suppress(OSError):
            reply.unlink()

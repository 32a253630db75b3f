"""This process: its Ray ids, its memory figures, and every piece of mutable state the kit keeps.

All process-wide state lives on :data:`state` (no other module has a mutable global or a
``global`` statement). :func:`reset` returns it to a fresh process's (for tests), and a
fork handler (``os.register_at_fork``) gives a forked child its own ids, files and locks,
so no hot path needs to compare pids.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray.exceptions import ActorDiedError

from raytrace_kit import _ray_compat

if sys.platform != "win32":  # Windows has no resource module
    import resource

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

    from raytrace_kit._output.context import ActiveCall
    from raytrace_kit._output.writer import EventWriter

__all__ = [
    "ProcessIdentity",
    "State",
    "call_ids",
    "memory_figures",
    "new_call_id",
    "process_identity",
    "reset",
    "state",
]


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """The Ray ids that stay fixed for the life of one process (or one Ray connection).

    Field names match those of ``ray.LoggingConfig(encoding="JSON")``.
    """

    job_id: str | None
    node_id: str | None
    worker_id: str | None
    pid: int
    is_worker: bool


class State:
    """Every mutable value raytrace_kit keeps for this process; see :func:`reset`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget every cached value (the caller closes what needs closing first)."""
        # --- identity (see process_identity, call_ids)
        self.worker_identity: ProcessIdentity | None = None  # a worker's ids never change
        self.driver_identity: tuple[object, ProcessIdentity] | None = None  # per connection
        self.actor_id: str | None = None  # a process hosts at most one actor, for life
        self.call_prefix = os.urandom(5).hex()  # call ids: prefix + counter
        self.call_counter = itertools.count()
        self.statm_fd: int | None = None  # /proc/self/statm, kept open
        # --- output (see _output)
        self.fallback_dir: Path | None = None  # log dir while Ray is not initialized
        self.last_ray_log_dir: Path | None = None  # the log dir of the last Ray session
        self.writers: dict[Path, EventWriter] = {}  # one open event file per directory
        self.worker_writer: EventWriter | None = None  # a worker's file, resolved once
        self.driver_writer: tuple[ProcessIdentity, EventWriter] | None = None
        self.warned: set[str] = set()  # warning keys shown already (warn once)
        self.identity_members: tuple[ProcessIdentity, str] | None = None  # rendered once
        self.clock: tuple[int, str] = (-1, "")  # the current second, formatted once
        self.echo = False  # get_logger() events also shown here (see _output.logger.echo)
        # --- live stacks (see _worker.stacks): calls running now, and the server thread
        self.running_calls: dict[int, ActiveCall] = {}  # id(call) -> call
        self.parents_hooked = False  # ActorMethod._remote carries parents (see _worker.parents)
        self.stacks_server: threading.Thread | None = None
        # --- profilers (see _worker.profilers): one memray per process, cProfile per thread
        self.memray_busy = False
        self.cprofile_threads: set[int] = set()
        # --- serialization checks: verdicts on classes (worth opening attribute by attribute?)
        self.user_data_types: dict[type, bool] = {}
        # --- local mode (see _local): process-wide setting, routing switch, actors, hooks
        self.local_setting: Any = None  # a LocalConfig, or None: off (set by _local.mode)
        self.local_active = False  # False until local mode is first used
        # (name, namespace) -> actor. Weak, as in Ray: a named actor ends with its last
        # handle, unless detached (those are kept alive in local_detached).
        self.local_actors: weakref.WeakValueDictionary[tuple[str, str | None], Any] = (
            weakref.WeakValueDictionary()
        )
        self.local_detached: list[Any] = []
        # Every live local actor by id (weak: an actor lives while a handle does).
        self.local_actors_by_id: weakref.WeakValueDictionary[str, Any] = (
            weakref.WeakValueDictionary()
        )
        self.local_loops: list[asyncio.AbstractEventLoop] = []  # one per async local actor
        self.local_identity: ProcessIdentity | None = None  # ids of local calls without Ray
        self.local_warned: set[str] = set()  # plain Ray calls warned about in local mode
        # ray.<dotted name> -> (Ray's function, our hook), while the hooks are installed.
        self.ray_hooks: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {}


state = State()


def reset() -> None:
    """Close files, remove hooks, stop helpers and forget every cached value (for tests)."""
    with state.lock:
        for writer in state.writers.values():
            writer.close()
        if state.statm_fd is not None:
            with contextlib.suppress(OSError):
                os.close(state.statm_fd)
        for key, (original, hook) in state.ray_hooks.items():
            name = key.partition("#")[0]  # "#..." tells apart two hooks of one attribute
            owner_path, _, attribute = name.rpartition(".")
            owner: Any = ray
            for part in filter(None, owner_path.split(".")):
                owner = getattr(owner, part)
            if getattr(owner, attribute, None) is hook:
                setattr(owner, attribute, original)
        for actor in list(state.local_actors_by_id.values()):
            actor.dead = ActorDiedError()
        for loop in state.local_loops:
            if not loop.is_closed():
                loop.call_soon_threadsafe(loop.stop)
        state.clear()


def _after_fork_in_child() -> None:
    """Give a forked child new ids, new files and fresh locks.

    Nothing is closed in the parent: the child closes only its own copies of descriptors.
    """
    state.lock = threading.Lock()
    writers = list(state.writers.values())
    statm = state.statm_fd
    hooks, actors, by_id, detached, setting, active = (
        state.ray_hooks,
        state.local_actors,
        state.local_actors_by_id,
        state.local_detached,
        state.local_setting,
        state.local_active,
    )
    fallback_dir = state.fallback_dir
    state.clear()
    state.fallback_dir = fallback_dir  # the child belongs to the parent's session
    for writer in writers:
        writer.forget()
    if statm is not None:
        with contextlib.suppress(OSError):
            os.close(statm)
    # What the program configured stays configured; the loop thread did not survive.
    state.ray_hooks, state.local_actors, state.local_actors_by_id = hooks, actors, by_id
    state.local_detached = detached
    state.local_setting, state.local_active = setting, active


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def process_identity() -> ProcessIdentity:
    """Return this process's identity.

    Cached: for life in Ray workers, whose ids never change; in a driver, until it
    connects to another Ray instance (``ray.shutdown()`` then ``ray.init()``).
    """
    identity = state.worker_identity
    if identity is not None:
        return identity
    pid = os.getpid()
    key = _ray_compat.connection_key(pid)
    cached = state.driver_identity
    if cached is not None and cached[0] == key:
        return cached[1]
    if key is None:
        identity = ProcessIdentity(None, None, None, pid, is_worker=False)
    else:
        ctx = ray.get_runtime_context()
        identity = ProcessIdentity(
            job_id=ctx.get_job_id(),
            node_id=ctx.get_node_id(),
            worker_id=ctx.get_worker_id(),
            pid=pid,
            is_worker=_ray_compat.is_worker_process(),
        )
    if identity.is_worker:
        state.worker_identity = identity
    else:
        state.driver_identity = (key, identity)
    return identity


def local_identity() -> ProcessIdentity:
    """The ids local-mode calls carry: Ray's when connected, else this process's own.

    Without Ray, local calls still have a job, node and worker id, so the runtime context
    and the events agree: stable for the life of the process (new after a fork) and in
    Ray's formats (8, 56 and 56 hex digits).
    """
    identity = process_identity()
    if identity.job_id is not None:
        return identity
    local = state.local_identity
    if local is None or local.pid != identity.pid:
        seed = os.urandom(60).hex()
        local = state.local_identity = ProcessIdentity(
            job_id=seed[:8],
            node_id=seed[8:64],
            worker_id=seed[64:120],
            pid=identity.pid,
            is_worker=False,
        )
    return local


def local_task_id(actor_id: str | None, job_id: str | None) -> str:
    """A task id for a local call, in Ray's format (48 hex digits: unique, actor, job)."""
    unique = f"{state.call_prefix}{next(state.call_counter) & 0xFFFFFF:06x}"
    actor_part = actor_id[:24] if actor_id else "f" * 24
    return f"{unique}{actor_part}{(job_id or '0' * 8)[:8]}"


def task_name() -> str | None:
    """Ray's name for the running task, or ``None`` if Ray cannot say."""
    try:
        return _ray_compat.current_task_name()
    except Exception:
        return None


def call_ids() -> tuple[str | None, str | None, int | None]:
    """Return ``(task_id, actor_id, attempt)`` of the Ray task running in this thread.

    Each read costs well under a microsecond; all three are ``None`` if Ray cannot say.
    """
    try:
        task_id = _ray_compat.current_task_id()
        actor_id = state.actor_id
        if actor_id is None:
            actor_id = state.actor_id = _ray_compat.current_actor_id()
        attempt: int | None = _ray_compat.current_attempt()
    except Exception:
        return None, None, None
    return task_id, actor_id, attempt


def new_call_id() -> str:
    """A 16-hex-digit id, unique across processes and nodes: random prefix + counter.

    The prefix is drawn from the OS once per process (again after a fork), so the ids of
    a process are distinct from those of every other process with near certainty.
    """
    return f"{state.call_prefix}{next(state.call_counter) & 0xFFFFFF:06x}"


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def memory_figures() -> tuple[int | None, int | None, int | None]:
    """``(rss, rss - shr, max_rss)`` of this process in bytes; ``None`` where unknown.

    RSS minus SHR is the per-process figure Ray's memory docs recommend: SHR is mostly the
    object store's shared memory, which RSS counts in every process that maps it. On Linux
    the figures come from ``/proc/self/statm`` (kept open, read with ``pread``); elsewhere
    only the high-water mark is known. The kernel updates the high-water mark lazily, so it
    is raised to the current RSS when it lags.
    """
    max_rss = _max_rss()
    if sys.platform != "linux":
        return None, None, max_rss
    try:
        fd = state.statm_fd
        if fd is None:
            fd = state.statm_fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        fields = os.pread(fd, 128, 0).split()
    except OSError:
        return None, None, max_rss
    rss, shr = int(fields[1]) * _PAGE, int(fields[2]) * _PAGE
    return rss, rss - shr, rss if max_rss is None or max_rss < rss else max_rss


# On Linux a thread's rusage carries the process's high-water RSS too (the mm's), and costs
# 2 µs where RUSAGE_SELF sums over every thread: 20 to 50 µs in a Ray worker of 22 threads.
if sys.platform == "linux":
    _RUSAGE_WHO = resource.RUSAGE_THREAD
elif sys.platform != "win32":
    _RUSAGE_WHO = resource.RUSAGE_SELF


def _max_rss() -> int | None:
    if sys.platform == "win32":
        return None
    max_rss = resource.getrusage(_RUSAGE_WHO).ru_maxrss
    # Linux reports kibibytes, macOS bytes.
    return int(max_rss) if sys.platform == "darwin" else int(max_rss) * 1024

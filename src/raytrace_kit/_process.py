"""This process: its Ray ids, its call ids and its memory figures.

What it keeps (:data:`state`) is truly process-wide; each room above keeps its own state
and registers it with :mod:`raytrace_kit._registry`, as this module does. A forked child
gets its own ids there, so no hot path needs to compare pids.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from dataclasses import dataclass

import ray

from raytrace_kit import _ray_compat, _registry

if sys.platform != "win32":  # Windows has no resource module
    import resource

__all__ = [
    "PROCESS_CPU_MIN_S",
    "REUSE_S",
    "THREAD_CPU_MIN_S",
    "ProcessIdentity",
    "ProcessState",
    "call_figures",
    "end_figures",
    "failed_here",
    "memory_figures",
    "new_call_id",
    "process_identity",
    "ran",
    "reset",
    "running_task",
    "start_figures",
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


class ProcessState:
    """What this process keeps of its own: ids, the call-id counter, the open statm file."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget every cached value (the caller closes what needs closing first)."""
        self.worker_identity: ProcessIdentity | None = None  # a worker's ids never change
        self.driver_identity: tuple[object, ProcessIdentity] | None = None  # per connection
        self.local_identity: ProcessIdentity | None = None  # ids of local calls without Ray
        self.actor_id: str | None = None  # a process hosts at most one actor, for life
        self.pid = os.getpid()  # a system call each time: kept (a forked child clears)
        self.call_prefix = os.urandom(5).hex()  # call ids: prefix + counter
        self.call_counter = itertools.count()
        self.statm_fd: int | None = None  # /proc/self/statm, kept open
        # The figures the last call.end read: (perf_counter, rss, rss - shr, max_rss,
        # process CPU), which a call starting right after it takes as its own (start_figures).
        self.last_end: tuple[float, int | None, int | None, int | None, float | None] | None = None
        self.short_calls: set[str] = set()  # functions whose last call was short (see ran())
        self.tiny_calls: set[str] = set()  # ...and under a millisecond (see ran())
        self.failed_attempts: dict[str, int] = {}  # task -> its last failed attempt here

    def close(self) -> None:
        """Close the statm file and forget everything (reset, and a forked child's copy)."""
        if self.statm_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.statm_fd)
        self.clear()

    def after_fork(self) -> None:
        """A forked child: its own ids, counter and lock; the parent's statm file closed."""
        self.lock = threading.Lock()
        self.close()


state = ProcessState()
_registry.register(state.close, state.after_fork, layer=_registry.PROCESS)


def reset() -> None:
    """Reset every owner of state in this process (see :mod:`raytrace_kit._registry`)."""
    _registry.reset()


def process_identity() -> ProcessIdentity:
    """Return this process's identity.

    Cached: for life in Ray workers, whose ids never change; in a driver, until it
    connects to another Ray instance (``ray.shutdown()`` then ``ray.init()``).
    """
    identity = state.worker_identity
    if identity is not None:
        return identity
    pid = state.pid
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
    unique = new_call_id()
    actor_part = actor_id[:24] if actor_id else "f" * 24
    return f"{unique}{actor_part}{(job_id or '0' * 8)[:8]}"


def running_task() -> tuple[str | None, str | None, int | None, str | None]:
    """``(task_id, actor_id, attempt, task_name)`` of the Ray task running in this thread.

    About 1.5 µs, read on every call; all four are ``None`` if Ray cannot say.
    """
    try:
        task_id, attempt, name = _ray_compat.current_task()
        actor_id = state.actor_id
        if actor_id is None:
            actor_id = state.actor_id = _ray_compat.current_actor_id()
    except Exception:
        return None, None, None, None
    failed = state.failed_attempts
    if failed and task_id in failed:  # a retry here: Ray may not say so (see failed_here)
        attempt = max(attempt, failed[task_id] + 1)
    return task_id, actor_id, attempt, name


# Ray 2.60's attempt number can read 0 on every retry of an actor's method (seen in async,
# threaded and plain actors, tests/integration/test_execute.py); an actor's retries run
# in its own process, so the process counts them: the attempt after a failed one is one
# more. Only failed calls are kept, the most recent few thousand.
_FAILED_KEPT = 4096


def failed_here(task_id: str | None, attempt: int | None) -> None:
    """An attempt of ``task_id`` failed in this process: a retry here is the next one."""
    if task_id is None:
        return
    failed = state.failed_attempts
    if len(failed) >= _FAILED_KEPT:
        del failed[next(iter(failed))]  # the oldest
    failed[task_id] = attempt or 0


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
    return call_figures(process_cpu=False)[:3]


def call_figures(
    *, process_cpu: bool
) -> tuple[int | None, int | None, int | None, float, float | None]:
    """What a call's start and end record: ``memory_figures()``, then two CPU clocks.

    ``(rss, rss - shr, max_rss, thread CPU seconds, process CPU seconds)``; the process's
    clock only if ``process_cpu`` (it sums every thread's: a library's thread pool too).
    Three system calls on Linux, the fewest that give them all: this thread's rusage
    carries the thread's CPU time and the process's high-water RSS, ``statm`` the rest.
    """
    process = time.process_time() if process_cpu else None
    if sys.platform != "linux":
        return None, None, _max_rss(), time.thread_time(), process
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    thread = usage.ru_utime + usage.ru_stime
    max_rss = usage.ru_maxrss * 1024  # kibibytes on Linux
    rss, private = _statm()
    if rss is None:
        return None, None, max_rss, thread, process
    return rss, private, rss if max_rss < rss else max_rss, thread, process


def _statm() -> tuple[int, int] | tuple[None, None]:
    """The RSS and the RSS less shared pages, from ``/proc/self/statm`` (Linux; kept open)."""
    try:
        fd = state.statm_fd
        if fd is None:
            fd = state.statm_fd = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        fields = os.pread(fd, 128, 0).split()
    except OSError:
        return None, None
    rss, shr = int(fields[1]) * _PAGE, int(fields[2]) * _PAGE
    return rss, rss - shr


# A call that starts this soon after another's end (back to back, as an actor's queued calls
# run) takes that end's memory figures and process clock instead of reading them again.
REUSE_S = 0.001


def start_figures(
    now: float, *, process_cpu: bool, thread_cpu: bool = True
) -> tuple[int | None, int | None, int | None, float, float | None]:
    """:func:`call_figures` at a call's start, ``now`` being its ``time.perf_counter()``.

    Right after another call's end (within :data:`REUSE_S`) the memory figures and the
    process's clock are that end's: at most a millisecond old, and not read again. Reading
    the process's clock is what costs most at a call's start in a Ray worker: it sums every
    thread's time, and Ray's threads are busy delivering the call just then (2.5 µs in the
    median, 26 µs in one call of ten, measured in an actor). Only this thread's CPU time is
    read fresh (one ``getrusage``), unless ``thread_cpu`` is false (then 0.0: no system
    call at all).
    """
    last = state.last_end
    if last is None or now - last[0] >= REUSE_S or (process_cpu and last[4] is None):
        return call_figures(process_cpu=process_cpu)
    if not thread_cpu:
        thread = 0.0
    elif sys.platform != "linux":
        thread = time.thread_time()
    else:
        usage = resource.getrusage(resource.RUSAGE_THREAD)
        thread = usage.ru_utime + usage.ru_stime
    return last[1], last[2], last[3], thread, last[4] if process_cpu else None


def end_figures(
    *, process_cpu: bool, usage: bool = True
) -> tuple[int | None, int | None, int | None, float, float | None]:
    """:func:`call_figures` at a call's end, kept for a call that starts right after it.

    ``usage`` false (a call under :data:`THREAD_CPU_MIN_S` that read no thread clock at
    its start): this thread's rusage is not read; the high-water RSS is the last one read,
    raised to the RSS now (what a call so short can have added above it is small), and the
    thread's CPU time 0.0.
    """
    last = state.last_end
    if usage or last is None or last[3] is None or sys.platform != "linux" or process_cpu:
        figures = call_figures(process_cpu=process_cpu)
    else:
        rss, private = _statm()
        peak = last[3] if rss is None or last[3] >= rss else rss
        figures = (rss, private, peak, 0.0, None)
    state.last_end = (time.perf_counter(), *figures[:3], figures[4])
    return figures


# The process's CPU clock sums every thread's time (about 22 in a Ray worker), and reading
# it was the largest part of the boundary's cost in a busy actor. Beside a call shorter than
# this the figure says little (Ray's own threads' work is most of it), so a function whose
# last call here was that short skips it: its next call's process_cpu_s is null.
PROCESS_CPU_MIN_S = 0.01


def ran(function: str, duration: float) -> None:
    """A call of ``function`` took ``duration``: which clocks its next call reads.

    Under :data:`PROCESS_CPU_MIN_S`, not the process's; under :data:`THREAD_CPU_MIN_S`,
    not the thread's either (nor this thread's rusage at its end).
    """
    short, tiny = state.short_calls, state.tiny_calls
    if duration < PROCESS_CPU_MIN_S:
        short.add(function)
        if duration < THREAD_CPU_MIN_S:
            tiny.add(function)
        elif tiny:
            tiny.discard(function)
    elif short:
        short.discard(function)
        tiny.discard(function)


# A call of a function whose last call here ran under this reads no thread CPU clock (its
# cpu_s is null): two system calls fewer a call, and beside so short a call the figure is
# mostly the kit's and Ray's own work around it.
THREAD_CPU_MIN_S = 0.001


# On Linux a thread's rusage carries the process's high-water RSS too (the mm's), and costs
# 2 µs where RUSAGE_SELF sums over every thread: 20 to 50 µs in a Ray worker of 22 threads.


def _max_rss() -> int | None:
    """The high-water RSS where there is no ``statm`` (macOS reports bytes)."""
    if sys.platform == "win32":
        return None
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

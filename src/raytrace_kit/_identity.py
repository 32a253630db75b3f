"""Who and where this process is: Ray ids, pid, and its memory figures."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

import ray

if sys.platform != "win32":  # Windows has no resource module
    import resource

__all__ = [
    "ProcessIdentity",
    "call_ids",
    "memory_members",
    "process_identity",
]


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """The Ray ids that stay fixed for the life of one process.

    Field names match those of ``ray.LoggingConfig(encoding="JSON")``.
    """

    job_id: str | None
    node_id: str | None
    worker_id: str | None
    pid: int
    is_worker: bool


_worker_identity: ProcessIdentity | None = None


def process_identity() -> ProcessIdentity:
    """Return this process's identity.

    Cached: for life in Ray workers, whose ids never change; in a driver, until it
    connects to another Ray instance (``ray.shutdown()`` then ``ray.init()``).
    """
    global _worker_identity, _driver_cache  # noqa: PLW0603 -- per-process caches
    pid = os.getpid()
    if _worker_identity is not None and _worker_identity.pid == pid:
        return _worker_identity
    # The mode and connection have no public getters.
    worker = ray._private.worker.global_worker
    connected = worker.connected
    key = (pid, worker.node.session_name, id(worker.core_worker)) if connected else (pid,)
    cached = _driver_cache
    if cached is not None and cached[0] == key:
        return cached[1]
    if not connected:
        identity = ProcessIdentity(None, None, None, pid, is_worker=False)
        _driver_cache = (key, identity)
        return identity
    ctx = ray.get_runtime_context()
    identity = ProcessIdentity(
        job_id=ctx.get_job_id(),
        node_id=ctx.get_node_id(),
        worker_id=ctx.get_worker_id(),
        pid=os.getpid(),
        is_worker=worker.mode == ray.WORKER_MODE,
    )
    if identity.is_worker:
        _worker_identity = identity
    else:
        _driver_cache = (key, identity)
    return identity


_driver_cache: tuple[tuple[object, ...], ProcessIdentity] | None = None


def call_ids() -> tuple[str | None, str | None, int | None]:
    """Return ``(task_id, actor_id, attempt)`` of the Ray task running in this thread.

    Reads the core worker directly: the public runtime context gives the same task and
    actor ids (thread- and coroutine-aware), but has no getter for the attempt number.
    Each read costs well under a microsecond.
    """
    global _actor_id  # noqa: PLW0603 -- an actor's id is fixed once it is set
    worker = ray._private.worker.global_worker
    try:
        task = worker.current_task_id
        task_id = None if task.is_nil() else task.hex()
        actor_id = _actor_id
        if actor_id is None:
            actor = worker.actor_id
            if not actor.is_nil():
                actor_id = _actor_id = actor.hex()
        attempt: int | None = worker.core_worker.get_current_task_attempt_number()
    except Exception:
        return None, None, None
    return task_id, actor_id, attempt


# A process that hosts an actor hosts only that actor, until it exits.
_actor_id: str | None = None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_statm_fd: int | None = None
_statm_pid = -1


def memory_members() -> str:
    """This process's memory figures, rendered as JSON object members for ``call.end``.

    ``rss_bytes``, ``rss_minus_shr_bytes`` and ``max_rss_bytes``. RSS minus SHR is the
    per-process figure Ray's memory docs recommend: SHR is mostly the object store's
    shared memory, which RSS counts in every process that maps it. On Linux the figures
    come from ``/proc/self/statm`` (kept open, read with ``pread``); elsewhere only the
    high-water mark is available and the other two are ``null``. The kernel updates the
    high-water mark lazily, so it is raised to the current RSS when it lags.
    """
    statm: tuple[int, int] | None = None
    if sys.platform == "linux":
        with contextlib.suppress(OSError):
            statm = _read_statm()
    max_rss = _max_rss()
    if statm is None:
        return f'"rss_bytes":null,"rss_minus_shr_bytes":null,"max_rss_bytes":{max_rss}'
    rss, shr = statm
    max_rss = rss if max_rss is None or max_rss < rss else max_rss
    return f'"rss_bytes":{rss},"rss_minus_shr_bytes":{rss - shr},"max_rss_bytes":{max_rss}'


def _read_statm() -> tuple[int, int]:
    global _statm_fd, _statm_pid  # noqa: PLW0603 -- per-process file handle cache
    pid = os.getpid()
    if _statm_fd is None or _statm_pid != pid:
        # A forked child inherits the parent's descriptor, which reads the parent's
        # figures; reopen when the pid changes.
        _statm_fd = os.open("/proc/self/statm", os.O_RDONLY)
        _statm_pid = pid
    fields = os.pread(_statm_fd, 128, 0).split()
    return int(fields[1]) * _PAGE, int(fields[2]) * _PAGE


def _max_rss() -> int | None:
    if sys.platform == "win32":
        return None
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports kibibytes, macOS bytes.
    return int(max_rss) if sys.platform == "darwin" else int(max_rss) * 1024

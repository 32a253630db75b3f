"""What the worker room keeps for this process: the calls running now, its threads, profilers.

Registered with :mod:`raytrace_kit._registry`: a reset and a forked child both start with
nothing running (threads do not survive a fork).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raytrace_kit import _registry

if TYPE_CHECKING:
    from raytrace_kit._output.context import ActiveCall
    from raytrace_kit._worker.loops import Watched
    from raytrace_kit._worker.sampler import Sampler

__all__ = ["WorkerState", "state"]


class WorkerState:
    """Every mutable value of the worker room; see the module's docstring."""

    def __init__(self) -> None:
        self.wake_fd: int | None = None
        self.clear()

    def clear(self) -> None:
        """Forget every value, with a fresh lock; the kit's thread, if any, ends.

        Closing its wake-up pipe ends the thread (it reads the pipe's end); in a forked
        child the thread did not survive the fork, and the descriptor is the child's copy.
        """
        fd, self.wake_fd = getattr(self, "wake_fd", None), None
        sampler = getattr(self, "sampler", None)
        if sampler is not None:  # its thread ends at its next tick (none in a forked child)
            sampler.stop()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.lock = threading.Lock()
        self.running_calls: dict[int, ActiveCall] = {}  # id(call) -> call, for live stacks
        self.parents_hooked = False  # ActorMethod._remote carries parents (see .parents)
        self.cancel_hooked = False  # ray.cancel leaves a call.cancel record (see .submitted)
        self.program_installed = False  # instrument()'s hooks, in a worker (see .boundary)
        # The kit's thread (see .watch): requests, stuck calls, submission batches.
        self.kit_thread: threading.Thread | None = None
        # The sampling profiler (see .sampler), once a call asked for it.
        self.sampler: Sampler | None = None
        self.watch_period = 3600.0  # seconds between its looks at the running calls
        self.stuck_after_default: float | None = None  # RAYTRACE_STUCK_AFTER, else 60 s
        # id(call) -> (call.stuck events written, running_s of the next one)
        self.stuck_reports: dict[int, tuple[int, float]] = {}
        # Async calls' event loops, by thread, with their heartbeats (see .loops); idle:
        # the kit's thread stopped looking at them (no async call was running).
        self.loops: dict[int, Watched] = {}
        self.loops_idle = True
        # One memray tracker per process; one cProfile profiler per thread (see .profilers).
        self.memray_busy = False
        self.cprofile_threads: set[int] = set()
        # Large arguments passed by value (see .by_value): id() -> (weak ref, serial).
        self.large_objects: dict[int, tuple[weakref.ref[Any], int]] = {}
        self.large_serials = itertools.count(1)
        self.sizers: dict[type, tuple[Callable[[Any], int], str] | None] = {}  # per type
        # The line of each ray.put of this process (see .held): object id -> (file, line).
        self.put_sites: dict[bytes, tuple[str, int]] = {}
        # Modules of the kit that could not be imported on demand (see .on_demand): off here.
        self.unimportable: set[str] = set()


state = WorkerState()
_registry.register(state.clear, state.clear, layer=_registry.WORKER)

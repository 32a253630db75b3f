"""Starting and stopping memray and cProfile for one call or block, never raising.

One memray tracker may be active per process and one cProfile per thread: a call or block
that finds its profiler taken runs unprofiled and logs a ``profile.skipped`` event.
memray is imported only when a memory profile is taken, cProfile and pstats when a CPU
profile is: a worker loads this module with the boundary, and most take no profile.
"""

from __future__ import annotations

import atexit
import json
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrace_kit._options import CallSpec, memray_available
from raytrace_kit._output import encode, frames, paths, writer
from raytrace_kit._output.context import ActiveCall
from raytrace_kit._worker import state as worker_state

if TYPE_CHECKING:
    import cProfile
    import pstats

__all__ = [
    "CallProfile",
    "Running",
    "claim",
    "failed",
    "memray_options",
    "memray_tracker_active",
    "release",
    "start",
    "start_call",
]


def memray_tracker_active() -> bool:
    """Whether some memray Tracker (the program's own, or ours) is tracking this process.

    memray allows one at a time, and offers no public way to ask. Entering a Tracker sets
    ``threading.setprofile`` to its ``start_thread_trace`` until it exits: that hook is
    the tell-tale read here (public API since Python 3.10).
    """
    hook = threading.getprofile()
    return getattr(hook, "__name__", "") == "start_thread_trace" and "memray" in str(
        getattr(hook, "__module__", "")
    )


def _acquire(profiler: str) -> bool:
    state = worker_state.state
    with state.lock:
        if profiler == "memray":
            if state.memray_busy:
                return False
            state.memray_busy = True
            return True
        thread = threading.get_ident()
        if thread in state.cprofile_threads:
            return False
        state.cprofile_threads.add(thread)
        return True


def _release(profiler: str, thread: int) -> None:
    state = worker_state.state
    with state.lock:
        if profiler == "memray":
            state.memray_busy = False
        else:
            state.cprofile_threads.discard(thread)


def _skipped(reason: str, function: str, profiler: str) -> str:
    writer.emit(
        "profile.skipped", "warning", {"function": function, "profiler": profiler, "reason": reason}
    )
    return reason


def memray_options(options: dict[str, Any]) -> dict[str, Any]:
    """``profile_options`` as ``memray.Tracker`` takes them (``file_format`` by name)."""
    import memray  # noqa: PLC0415 -- imported only when a memory profile is taken

    opts = dict(options)
    if isinstance(opts.get("file_format"), str):
        opts["file_format"] = memray.FileFormat[opts["file_format"]]
    return opts


def _without_kit_rows(stats: pstats.Stats) -> pstats.Stats:
    """The profile without the kit's call path (its wrappers, boundary, profiler's stop).

    A listing then starts at the user's code, as a profile of the plain call would; the
    calls the kit's rows made keep their own times, now without a caller of the kit's.
    """
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]  # pstats' own table
    kit = {key for key in table if frames.on_call_path(key[0])}
    # Built-ins and the standard library called by the kit's rows only are the kit's too
    # (a context variable reset, contextlib.suppress): the user's own code stays.
    kit |= {
        key
        for key, (*_, callers) in table.items()
        if callers and set(callers) <= kit and (key[0] == "~" or frames.in_stdlib(key[0]))
    }
    for key in kit:
        del table[key]
    for *_, callers in table.values():
        for key in kit:
            callers.pop(key, None)
    return stats


def _this_thread_only() -> None:
    """Keep the cProfile profiler just enabled to the calling thread (Python 3.12+).

    From Python 3.12 cProfile records through ``sys.monitoring``, which reports every
    thread's calls (before, ``sys.setprofile`` was per thread): another thread's calls, Ray's
    or the kit's, would land in the block's profile and unbalance its stack. Each callback
    cProfile registered is re-registered behind a check of the thread; cProfile's own
    ``disable()`` unregisters them. A no-op before 3.12.
    """
    monitoring: Any = getattr(sys, "monitoring", None)  # Python 3.12+
    if monitoring is None:
        return
    tool = monitoring.PROFILER_ID
    owner = threading.get_ident()
    events = monitoring.events
    for name in dir(events):
        event = getattr(events, name)
        if not isinstance(event, int) or event <= 0 or event & (event - 1):
            continue  # NO_EVENTS and unions of events are not registration keys
        callback = monitoring.register_callback(tool, event, None)
        if callback is not None:
            arity = _ARITY.get(name, 0)
            monitoring.register_callback(tool, event, _filter(callback, owner, arity))


# The arguments of each sys.monitoring callback (its docs); any other event: *args.
_ARITY = {"PY_START": 2, "PY_RESUME": 2, "LINE": 2, "INSTRUCTION": 2, "CALL": 4}
_ARITY |= {"C_RETURN": 4, "C_RAISE": 4, "PY_RETURN": 3, "PY_YIELD": 3, "PY_THROW": 3}
_ARITY |= {"PY_UNWIND": 3, "RAISE": 3, "RERAISE": 3, "EXCEPTION_HANDLED": 3}


def _filter(callback: Any, owner: int, arity: int) -> Any:
    """``callback`` called only in thread ``owner``; an exact arity costs no tuple.

    A Python function between ``sys.monitoring`` and cProfile's C callbacks: a profiled
    block runs 2.5 to 3.2 times as long as under cProfile alone (calls of a tiny function,
    Python 3.12 and 3.13, 2026-11-28), the price of a profile of one thread.
    """
    get_ident = threading.get_ident
    if arity == 0:

        def filtered(*args: Any) -> Any:
            return callback(*args) if get_ident() == owner else None

        return filtered
    if arity == 2:

        def filtered2(code: Any, offset: int) -> Any:
            return callback(code, offset) if get_ident() == owner else None

        return filtered2
    if arity == 3:

        def filtered3(code: Any, offset: int, value: Any) -> Any:
            return callback(code, offset, value) if get_ident() == owner else None

        return filtered3

    def filtered4(code: Any, offset: int, value: Any, arg: Any) -> Any:
        return callback(code, offset, value, arg) if get_ident() == owner else None

    return filtered4


class Running:
    """One running profiler: a memray tracker or a cProfile profiler, writing to ``path``.

    A memray tracker started with ``enter=False`` is :attr:`tracker`, for the caller to
    enter with ``with`` in the frame that calls the user's code: memray records no frame
    that was on the stack when tracking started and has returned since, so a tracker
    entered in a helper function records empty stacks.
    """

    def __init__(self, profiler: str, path: Path, options: dict[str, Any], enter: bool) -> None:
        self.profiler = profiler
        self.path = path
        self.thread = threading.get_ident()
        self.started = time.time()
        self.tracker: Any = None
        self._entered_here = enter
        self._profile: cProfile.Profile | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        if profiler == "memray":
            import memray  # noqa: PLC0415 -- imported only when a memory profile is taken

            self.tracker = memray.Tracker(str(path), **memray_options(options))
            if enter:
                self.tracker.__enter__()
        else:
            import cProfile  # noqa: PLC0415 -- imported only when a CPU profile is taken

            self._profile = cProfile.Profile(**options)
            self._profile.enable()
            _this_thread_only()

    def stop(self) -> None:
        """Stop profiling and write the file (memray writes as it goes)."""
        try:
            if self.tracker is not None:
                if self._entered_here:
                    self.tracker.__exit__(None, None, None)
            elif self._profile is not None:
                import pstats  # noqa: PLC0415 -- as cProfile

                self._profile.disable()
                _without_kit_rows(pstats.Stats(self._profile)).dump_stats(str(self.path))
        finally:
            _release(self.profiler, self.thread)

    def peak_memory(self) -> int | None:
        """memray: the peak of tracked memory, read back from the finished capture."""
        if self.profiler != "memray":
            return None
        import memray  # noqa: PLC0415

        reader = memray.FileReader(str(self.path))
        try:
            return int(reader.metadata.peak_memory)
        finally:
            reader.close()


def start(
    profiler: str, path: Path, options: dict[str, Any], function: str, *, enter: bool = True
) -> Running | str:
    """Start a profiler, or log why not (``profile.skipped``) and return that reason."""
    reason = claim(profiler, function)
    if reason is not None:
        return reason
    try:
        return Running(profiler, path, options, enter)
    except Exception as exc:
        return failed(profiler, function, exc)


def claim(profiler: str, function: str) -> str | None:
    """Take this process's memray slot (or this thread's cProfile slot), if it is free.

    Returns:
        ``None`` if taken (give it back with :func:`release`); else why not, also logged
        as a ``profile.skipped`` event.
    """
    if profiler == "memray" and not memray_available():
        return _skipped("memray is not installed in this process", function, profiler)
    if profiler == "memray" and not worker_state.state.memray_busy and memray_tracker_active():
        reason = "a memray Tracker of the program is already active in this process"
        return _skipped(reason, function, profiler)
    if not _acquire(profiler):
        where = "process" if profiler == "memray" else "thread"
        reason = f"another {profiler} profiler is active in this {where}"
        return _skipped(reason, function, profiler)
    return None


def release(profiler: str) -> None:
    """Give back the slot :func:`claim` took in this thread."""
    _release(profiler, threading.get_ident())


def failed(profiler: str, function: str, exc: BaseException) -> str:
    """A claimed profiler could not start: give the slot back, log and return why."""
    release(profiler)
    return _skipped(f"could not start: {type(exc).__name__}: {exc}", function, profiler)


class CallProfile:
    """The profiler of one instrumented call (see :class:`~.boundary.Boundary`)."""

    def __init__(self, running: Running, spec: CallSpec, call: ActiveCall) -> None:
        self.running = running
        self.spec = spec
        self.call = call

    def abandon(self, exc: BaseException) -> None:
        """The tracker could not be entered: give the slot back and say why."""
        failed(self.running.profiler, self.spec.function, exc)

    @property
    def tracker(self) -> Any:
        """The memray tracker the caller must enter around the user's code, or ``None``."""
        running = self.running
        return None if running._entered_here else running.tracker

    def finish(self, exc: BaseException | None) -> str:
        """Stop, write the sidecar; return JSON members for ``call.end`` (``profile_path``)."""
        running = self.running
        options = self.spec.options
        if options.profile_scope == "actor" and self.spec.kind == "actor_init" and exc is None:
            # Leak hunting: the capture runs for the actor's whole life, until it exits.
            atexit.register(running.stop)
            return encode.profile_members(running.path, None, "actor")
        running.stop()
        duration = time.time() - running.started
        call = self.call
        sidecar: dict[str, Any] = {
            "function": self.spec.function,
            "kind": self.spec.kind,
            "call_id": call.call_id,
            "task_id": call.task_id,
            "actor_id": call.actor_id,
            "node_id": call.identity.node_id,
            "pid": call.identity.pid,
            "attempt": call.attempt,
            "profiler": running.profiler,
            "path": str(running.path),
            "start": datetime.fromtimestamp(running.started, timezone.utc).isoformat(),
            "duration_s": round(duration, 6),
            "status": "ok" if exc is None else "error",
            "profile_block": options.profile_block,
        }
        try:
            sidecar["peak_memory_bytes"] = running.peak_memory()
        except Exception:
            sidecar["peak_memory_bytes"] = None
        running.path.with_suffix(".json").write_text(json.dumps(sidecar, indent=1))
        return encode.profile_members(running.path, options.profile_block, None)


def start_call(spec: CallSpec, call: ActiveCall) -> CallProfile | None:
    """Start the profiler of one call, per its options; ``None`` if it runs unprofiled."""
    options = spec.options
    profiler = options.profile
    if profiler is None:
        return None
    if options.profile_scope == "actor" and spec.kind != "actor_init":
        return None  # the actor's own capture, started in __init__, covers its calls
    if call.call_id is None:
        call.capture()
    path = paths.call_profile_path(
        spec.function,
        spec.kind,
        task_id=call.task_id,
        attempt=call.attempt,
        call_id=str(call.call_id),
        profiler=profiler,
    )
    # A call's memray tracker is entered by the runner, around the user's code; an actor's
    # lifelong one (profile_scope="actor") here, and it stops when the process exits.
    enter = profiler != "memray" or options.profile_scope == "actor"
    running = start(profiler, path, dict(options.profile_options), spec.function, enter=enter)
    return CallProfile(running, spec, call) if isinstance(running, Running) else None

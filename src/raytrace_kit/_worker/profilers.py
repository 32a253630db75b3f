"""Starting and stopping memray and cProfile for one call or block, never raising.

One memray tracker may be active per process and one cProfile per thread: a call or block
that finds its profiler taken runs unprofiled and logs a ``profile.skipped`` event.
memray is imported only when a memory profile is taken.
"""

from __future__ import annotations

import atexit
import cProfile
import json
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from raytrace_kit import _process
from raytrace_kit._options import CallSpec, memray_available
from raytrace_kit._output import paths, schema, writer
from raytrace_kit._output.context import ActiveCall

__all__ = ["CallProfile", "Running", "start", "start_call"]


def _acquire(profiler: str) -> bool:
    state = _process.state
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
    state = _process.state
    with state.lock:
        if profiler == "memray":
            state.memray_busy = False
        else:
            state.cprofile_threads.discard(thread)


def _skipped(reason: str, function: str, profiler: str) -> None:
    writer.emit(
        "profile.skipped", "warning", {"function": function, "profiler": profiler, "reason": reason}
    )


class Running:
    """One running profiler: a memray tracker or a cProfile profiler, writing to ``path``."""

    def __init__(self, profiler: str, path: Path, options: dict[str, Any]) -> None:
        self.profiler = profiler
        self.path = path
        self.thread = threading.get_ident()
        self.started = time.time()
        self._tracker: Any = None
        self._profile: cProfile.Profile | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        if profiler == "memray":
            import memray  # noqa: PLC0415 -- imported only when a memory profile is taken

            opts = dict(options)
            if isinstance(opts.get("file_format"), str):
                opts["file_format"] = memray.FileFormat[opts["file_format"]]
            self._tracker = memray.Tracker(str(path), **opts)
            self._tracker.__enter__()
        else:
            self._profile = cProfile.Profile(**options)
            self._profile.enable()

    def stop(self) -> None:
        """Stop profiling and write the file (memray writes as it goes)."""
        try:
            if self._tracker is not None:
                self._tracker.__exit__(None, None, None)
            elif self._profile is not None:
                self._profile.disable()
                self._profile.dump_stats(str(self.path))
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


def start(profiler: str, path: Path, options: dict[str, Any], function: str) -> Running | None:
    """Start a profiler, or log why not (``profile.skipped``) and return ``None``."""
    if profiler == "memray" and not memray_available():
        _skipped("memray is not installed in this process", function, profiler)
        return None
    if not _acquire(profiler):
        where = "process" if profiler == "memray" else "thread"
        _skipped(f"another {profiler} profiler is active in this {where}", function, profiler)
        return None
    try:
        return Running(profiler, path, options)
    except Exception as exc:
        _release(profiler, threading.get_ident())
        _skipped(f"could not start: {type(exc).__name__}: {exc}", function, profiler)
        return None


class CallProfile:
    """The profiler of one instrumented call (see :class:`~.boundary.Boundary`)."""

    def __init__(self, running: Running, spec: CallSpec, call: ActiveCall) -> None:
        self.running = running
        self.spec = spec
        self.call = call

    def finish(self, exc: BaseException | None) -> str:
        """Stop, write the sidecar; return JSON members for ``call.end`` (``profile_path``)."""
        running = self.running
        options = self.spec.options
        if options.profile_scope == "actor" and self.spec.kind == "actor_init" and exc is None:
            # Leak hunting: the capture runs for the actor's whole life, until it exits.
            atexit.register(running.stop)
            return schema.profile_members(running.path, None, "actor")
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
        return schema.profile_members(running.path, options.profile_block, None)


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
    running = start(profiler, path, dict(options.profile_options), spec.function)
    return None if running is None else CallProfile(running, spec, call)

"""The sampling profiler: every thread's stack, from a kit thread, at a set rate (no ptrace).

Started at the first call whose options ask for it (``sample=``), once per process, at
that call's rate; never started otherwise (off costs nothing). Each tick it reads
``sys._current_frames()`` and, for every thread but the kit's own:

- the stack, frames interned once per process (the kit's call path left out, as in
  tracebacks, and so are the kit's frames it calls, with the standard library's they call:
  a call's end writing its event; in a driver, the launcher of ``raytrace-kit run``);
- the call it belongs to: the instrumented call running on that thread (the boundary's
  ``running_calls``; the innermost if several nest; on an event loop's thread, the call
  whose asyncio task the loop runs now), else "no call";
- running or waiting (:mod:`.waiting`).

Counts per distinct sample go to the process's samples file every
:data:`FLUSH_S` (:mod:`raytrace_kit._output.samples`), in one ``os.write``. A driver's
sampler (:func:`start_driver`) starts before Ray may be up: its file is named, and
written, once Ray is (or a local-mode call runs here).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import sys
import threading
import time
from types import CodeType
from typing import Any

import ray

from raytrace_kit import _process
from raytrace_kit._output import paths, writer
from raytrace_kit._output import state as output_state
from raytrace_kit._output.frames import in_stdlib, on_call_path
from raytrace_kit._output.samples import SamplesFile
from raytrace_kit._output.tracebacks import KIT_DIR
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker.waiting import is_waiting

__all__ = ["DEFAULT_HZ", "FLUSH_S", "KIT_THREAD_PREFIX", "Sampler", "start", "start_driver"]

DEFAULT_HZ = 100.0
FLUSH_S = 1.0  # counts written this often: what a kill -9 can lose
_IDLE_GAP = FLUSH_S - 0.1  # the calls ended: flush, if the last flush is 0.1 s old
KIT_THREAD_PREFIX = "raytrace_kit"  # the kit's threads are named so, and never sampled
_KIT_THREADS = (KIT_THREAD_PREFIX, "raytrace-kit")  # (the driver's store watch: a hyphen)
_UNPLACED_BYTES = 1 << 20  # a driver's samples kept in memory before Ray is up, at most
# What a frame is to the stacks: the user's and kept; the kit's call path, left out; the
# kit's other code, the standard library's or Ray's, left out when the call path called it
# (a call's end writing its event), kept when the user's code did (get_logger(), ray.get)
# or nobody did (Ray's worker loop); the launcher of `raytrace-kit run`, left out with
# every frame outside it.
_KEPT, _CALL_PATH, _KIT, _LAUNCHER = 0, 1, 2, 3
_LAUNCHER_FILE = os.path.join("raytrace_kit", "_driver", "launch.py")
_RAY_DIR = os.path.join(os.path.dirname(os.path.abspath(ray.__file__)), "")


def start(hz: float) -> None:
    """Start this process's sampler at ``hz`` (once: later calls return). Never raises."""
    _start(hz, None)


def start_driver(hz: float, script: str) -> None:
    """Start the driver's sampler: its samples say "no call" (or a local call's) and ``script``.

    Its file is named once Ray is up (:meth:`Sampler.place`): the node's id is in it.
    """
    _start(hz, script)


def _start(hz: float, script: str | None) -> None:
    state = worker_state.state
    if state.sampler is not None:
        return
    try:
        with state.lock:
            if state.sampler is not None:
                return  # type: ignore[unreachable]  # started by another thread meanwhile
            sampler = state.sampler = Sampler(SamplesFile(None, {}), hz, script)
            if script is None:
                sampler.place()
            sampler.thread.start()
        atexit.register(sampler.flush)
    except Exception as exc:  # the calls run on, unsampled
        writer.report_failure("sampler", "cannot start the sampling profiler", exc)


class Sampler:
    """The sampling thread and what it keeps between ticks."""

    def __init__(self, out: SamplesFile, hz: float, script: str | None = None) -> None:
        self.out = out
        self.hz = hz
        self.script = script  # a driver's: its file is placed once Ray is up
        self.period = 1.0 / hz
        self.stopped = False
        self.lock = threading.Lock()  # a tick, or a flush (the thread's, atexit's)
        self.hidden: dict[CodeType, int] = {}  # code -> what it is to the stacks (_KEPT...)
        self.names: dict[int, str] = {}
        self.skip: set[int] = set()
        # Each thread at the last tick: (where its innermost frame was, stack id, waiting).
        self.last: dict[int, tuple[Any, int, bool]] = {}
        self.thread = threading.Thread(
            target=self._run, name=f"{KIT_THREAD_PREFIX}-sampler", daemon=True
        )

    def stop(self) -> None:
        """End the thread at its next tick (it flushes first); a reset's, a fork's."""
        self.stopped = True

    def _run(self) -> None:
        self._threads()
        period = self.period
        due = time.monotonic()
        flush_at = due + FLUSH_S
        was_busy = False
        self.flush()  # the header: the file is there from the start
        while not self.stopped:
            due += period
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                due = time.monotonic()  # late (a call held the GIL): no burst to catch up
            try:
                busy = self.tick()
                now = time.monotonic()
                # Every FLUSH_S, and as soon as the calls end (a driver that exits then has
                # its workers killed within the second): at most IDLE_FLUSH_S apart.
                if now >= flush_at or (was_busy and not busy and now >= flush_at - _IDLE_GAP):
                    flush_at = now + FLUSH_S
                    if not self.flush():
                        return  # capped, or the file cannot be written: sampling ends
                    self._threads()
                was_busy = busy
            except Exception as exc:  # never in the calls' way: sampling ends
                writer.report_failure("sampler-tick", "the sampling profiler stopped", exc)
                return
        self.flush()
        self.out.close()  # a reset's stop: its descriptor closed (atexit's flush reopens)

    def _threads(self) -> None:
        """Thread names, and the kit's own threads (skipped): refreshed at each flush."""
        names = {t.ident: t.name for t in threading.enumerate() if t.ident is not None}
        for ident, name in self.names.items():
            if names.get(ident, name) != name:  # a new thread with an ended one's ident
                self.out.threads.pop(ident, None)
        self.names = names
        self.skip = {ident for ident, name in names.items() if name.startswith(_KIT_THREADS)}
        self.skip.add(threading.get_ident())

    def place(self) -> None:
        """Name this process's file (the node's id and the pid) and write what waited."""
        identity = _process.process_identity()
        header: dict[str, Any] = {
            "pid": identity.pid,
            "node_id": identity.node_id,
            "worker_id": identity.worker_id,
            "hz": self.hz,
            "t": time.time(),
        }
        if self.script is not None:
            header.update(role="driver", script=self.script)
        directory = paths.log_dir() if self.script is None else paths.recent_log_dir()
        self.out.place(directory / paths.samples_file_name(identity.node_id, identity.pid), header)

    def flush(self) -> bool:
        """Write the counts gathered since the last flush; ``False`` once capped."""
        with self.lock:
            out = self.out
            if out.path is None and (
                ray.is_initialized()
                or output_state.state.last_ray_log_dir is not None  # Ray was up, and shut down
                or worker_state.state.running_calls  # a local-mode call: its log dir
                or out.pending_bytes() > _UNPLACED_BYTES
            ):
                try:
                    self.place()
                except Exception as exc:  # at exit too: never an error of the user's program
                    writer.report_failure("sampler-place", "cannot name the samples file", exc)
                    return False
            return out.flush()

    def tick(self) -> bool:
        """One sample of every thread; whether instrumented calls were running."""
        out = self.out
        threads_of, skip = out.threads, self.skip
        state = worker_state.state
        calls = _calls_by_thread(state) if state.running_calls else {}
        seen, last = self.last, {}
        with self.lock:
            for ident, frame in sys._current_frames().items():
                if ident in skip:
                    continue
                if ident not in self.names:  # started since the last look: the kit's own?
                    self._threads()
                    skip = self.skip
                    self.names.setdefault(ident, f"thread-{ident}")  # (not threading's)
                    if ident in skip:
                        continue
                # A thread still in the same frame at the same instruction (a wait, mostly)
                # has the same stack as at the last tick: its callers are suspended.
                where = (id(frame), frame.f_lasti, id(frame.f_back), frame.f_code)
                known = seen.get(ident)
                if known is not None and known[0] == where:
                    stack_id, waiting = known[1], known[2]
                else:
                    stack_id, waiting = self._stack(frame), is_waiting(frame)
                last[ident] = (where, stack_id, waiting)
                if not stack_id:
                    continue  # the kit's own frames only (a driver's launcher): not sampled
                thread_id = threads_of.get(ident) or self._thread(ident)
                running = calls.get(ident)
                call_id = 0 if running is None else self._call(ident, running, state)
                out.counts[stack_id, thread_id, call_id, 1 if waiting else 0] += 1
        self.last = last
        return bool(calls)

    def _stack(self, frame: Any) -> int:
        """The id of a thread's stack, innermost ``frame``: its frames interned.

        From the innermost out, the kit's frames and the standard library's wait in
        ``pending`` until the walk knows whose they are: a frame of the user's (or Ray's)
        code outside them keeps them; the kit's call path drops them (a call's end).
        """
        out, hidden = self.out, self.hidden
        frames_of, stacks_of = out.frames, out.stacks
        ids: list[int] = []
        pending: list[int] = []
        each: Any = frame
        while each is not None:
            code = each.f_code
            kind = hidden.get(code)
            if kind is None:
                kind = hidden[code] = _kind(code.co_filename)
            if kind == _CALL_PATH:
                pending.clear()
            elif kind == _LAUNCHER:
                pending.clear()
                break  # the program's first frame is the stack's root
            else:
                line = each.f_lineno or 0
                frame_id = frames_of.get((code, line)) or out.frame(code, line)
                if kind == _KIT:
                    pending.append(frame_id)
                else:
                    ids.extend(pending)
                    pending.clear()
                    ids.append(frame_id)
            each = each.f_back
        ids.extend(pending)
        if not ids:
            return 0
        ids.reverse()
        stack = tuple(ids)
        return stacks_of.get(stack) or out.stack(stack)

    def _thread(self, ident: int) -> int:
        if ident not in self.names:
            self._threads()
        return self.out.thread(ident, self.names.get(ident, f"thread-{ident}"))

    def _call(self, ident: int, running: list[Any], state: Any) -> int:
        """The id of the call a thread runs now (0: none); see the module's docstring."""
        call = _current(ident, running, state)
        if call is None:
            return 0
        key = call.call_id or id(call)
        known = self.out.calls.get(key)
        if known is not None:
            return known
        return self.out.call(
            key,
            {
                "call_id": call.call_id,
                "function": call.spec_fields["function"],
                "actor_id": getattr(call, "actor_id", None),
                "task_id": getattr(call, "task_id", None),
            },
        )


def _kind(filename: str) -> int:
    """What code of ``filename`` is to the stacks (see ``_KEPT``...)."""
    if on_call_path(filename):
        return _CALL_PATH
    if filename.endswith(_LAUNCHER_FILE):
        return _LAUNCHER
    if filename.startswith((KIT_DIR, _RAY_DIR, "<frozen ")) or in_stdlib(filename):
        return _KIT
    return _KEPT


def _calls_by_thread(state: Any) -> dict[int, list[Any]]:
    found: dict[int, list[Any]] = {}
    for call in list(state.running_calls.values()):
        found.setdefault(call.thread, []).append(call)
    return found


def _current(ident: int, running: list[Any], state: Any) -> Any:
    """The call of ``running`` (those started on thread ``ident``) the thread runs now."""
    tasks = [call for call in running if getattr(call, "task", None) is not None]
    if not tasks:
        return max(running, key=lambda call: call.started)  # nested calls: the innermost
    watched = state.loops.get(ident)
    if watched is None:
        return None
    with contextlib.suppress(RuntimeError):
        task = asyncio.current_task(watched.loop)  # the task the loop runs now, if any
        return next((call for call in tasks if call.task is task), None)
    return None

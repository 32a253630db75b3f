"""Live stacks: every thread's Python frames and the instrumented calls they run.

:func:`process_stacks` reads them in this process; :mod:`.stack_server` serves them to
``stacks(handle)`` from a thread of the kit's own.
"""

from __future__ import annotations

import html
import os
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
from raytrace_kit._output.frames import in_stdlib
from raytrace_kit._worker import state as worker_state

__all__ = ["ProcessStacks", "RunningCall", "ThreadStack", "process_stacks"]

# Frames from these directories are hidden unless all frames are asked for.
_HIDDEN_DIRS = (
    str(Path(ray.__file__).parent) + os.sep,
    str(Path(__file__).parents[1]) + os.sep,  # raytrace_kit
)


def _is_system(filename: str) -> bool:
    """Whether a frame is Ray's, the kit's or the standard library's.

    A thread with no other frame (and no instrumented call) is Ray's or Python's own (Ray's
    GC and log threads...): left out unless all frames are asked for.
    """
    return filename.startswith(_HIDDEN_DIRS) or in_stdlib(filename)


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
    for call in list(worker_state.state.running_calls.values()):
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

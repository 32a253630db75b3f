"""The kit's thread in each process: answers requests, reports stuck calls, writes submissions.

One daemon thread per process that runs instrumented calls or submits them, started at
the first of either. It never runs user code, installs no signal handler, opens no network
port, and uses no CPU while nothing is due: it blocks in ``select()`` on the process's
request pipe (a FIFO in the node's log dir, mode 0600: ``stacks(handle)`` and ``stuck()``
ask there) and on a wake-up pipe, with a timeout. It wakes

- for a request: the live stacks, or the snapshot ``stuck()`` reads (:mod:`.snapshot`);
- :data:`~raytrace_kit._output.submissions.FLUSH_S` after a batch of submission records
  began, to write it;
- every watch period (a quarter of the smallest ``stuck_after`` in use: 15 s by default):
  each call running past its ``stuck_after`` gets a ``call.stuck`` event with its stack and
  what it waits on, again at twice, four times... that age;
- every :data:`~raytrace_kit._worker.loops.LOOK_S` while async calls run: a heartbeat to
  each event loop, and a ``call.blocked`` for a turn that held one (:mod:`.loops`).

Why a FIFO and a thread: see :mod:`.stack_server`. It answers while the user's threads are
blocked in Python or in C code that releases the GIL; a call holding the GIL for seconds
delays it (and then its ``call.stuck``) until it lets go.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import threading
import time
from pathlib import Path

from raytrace_kit._output import encode, submissions, writer
from raytrace_kit._output import state as output_state
from raytrace_kit._worker import stack_server
from raytrace_kit._worker import state as worker_state

__all__ = [
    "DEFAULT_STUCK_AFTER",
    "ENV_STUCK_AFTER",
    "report_stuck",
    "shorten",
    "start",
    "stuck_after_default",
]

ENV_STUCK_AFTER = "RAYTRACE_STUCK_AFTER"
DEFAULT_STUCK_AFTER = 60.0
_IDLE_PERIOD = 3600.0  # the watch off everywhere: wake this seldom (nothing to do)
_MIN_PERIOD = 0.05


def stuck_after_default() -> float | None:
    """The process's ``stuck_after``: ``RAYTRACE_STUCK_AFTER`` (seconds, or ``off``), else 60."""
    value = os.environ.get(ENV_STUCK_AFTER, "").strip().lower()
    if not value:
        return DEFAULT_STUCK_AFTER
    if value in {"off", "false", "no", "0", "none"}:
        return None
    try:
        seconds = float(value)
    except ValueError:
        writer.warn(
            f"raytrace_kit: {ENV_STUCK_AFTER}={value!r} is not a number of seconds nor 'off'; "
            f"calls count as stuck after {DEFAULT_STUCK_AFTER:g} s."
        )
        return DEFAULT_STUCK_AFTER
    return seconds if seconds > 0 else None


def start() -> None:
    """Start this process's kit thread (once; later calls return at once). Never raises."""
    state = worker_state.state
    if state.kit_thread is not None:
        return
    try:
        with state.lock:
            if state.kit_thread is not None:  # started by another thread meanwhile
                return  # type: ignore[unreachable]
            default = stuck_after_default()
            state.stuck_after_default = default
            state.watch_period = max(default / 4, _MIN_PERIOD) if default else _IDLE_PERIOD
            wake_read, wake_write = os.pipe()
            os.set_blocking(wake_write, False)
            fifo = stack_server.open_fifo()  # None where it cannot be made: no live stacks
            thread = threading.Thread(
                target=_run, args=(fifo, wake_read), name="raytrace_kit-watch", daemon=True
            )
            state.wake_fd = wake_write
            state.kit_thread = thread
            thread.start()
        output_state.state.wake = _wake
    except Exception as exc:  # the calls run on; nothing watched, submissions written later
        writer.report_failure("kit-thread", "cannot start the kit's thread", exc)


def _wake() -> None:
    fd = worker_state.state.wake_fd
    if fd is not None:
        with contextlib.suppress(OSError):  # full (it is awake anyway) or closed
            os.write(fd, b"\0")


def shorten(stuck_after: float) -> None:
    """A call whose ``stuck_after`` is under four watch periods began: watch more often."""
    state = worker_state.state
    period = max(stuck_after / 4, _MIN_PERIOD)
    if period < state.watch_period:
        state.watch_period = period
        _wake()


class _Due:
    """When the kit's thread has something to do next, besides answering requests."""

    def __init__(self, watch_period: float) -> None:
        self.flush: float | None = None  # the batch of submission records waiting
        self.watch = time.monotonic() + watch_period  # the look at stuck calls
        self.look: float | None = None  # the look at async calls' loops (see .loops)

    def timeout(self, now: float) -> float:
        if self.flush is None and output_state.state.submissions:
            self.flush = now + submissions.FLUSH_S  # a batch began (perhaps before we did)
        if self.look is None and not worker_state.state.loops_idle:
            self.look = now  # an async call began: look at its loop
        soonest = min(t for t in (self.watch, self.flush, self.look) if t is not None)
        return max(soonest - now, 0.0)

    def run(self, now: float) -> None:
        """Do what is due; never raises (a warning made an error never ends the thread)."""
        if self.flush is not None and now >= self.flush:
            self.flush = None
            with contextlib.suppress(Exception):
                submissions.flush()
        if self.look is not None and now >= self.look:
            self.look = None
            with contextlib.suppress(Exception):
                # Imported by the async call that started the looks (see .on_demand).
                from raytrace_kit._worker import loops  # noqa: PLC0415

                if loops.look():
                    self.look = now + loops.LOOK_S
        if now >= self.watch:
            with contextlib.suppress(Exception):
                report_stuck()
            self.watch = now + worker_state.state.watch_period


def _run(fifo: tuple[int, Path] | None, wake_read: int) -> None:
    state = worker_state.state
    watched = [wake_read] if fifo is None else [fifo[0], wake_read]
    pending = b""
    due = _Due(state.watch_period)
    while True:
        try:
            ready, _, _ = select.select(watched, [], [], due.timeout(time.monotonic()))
        except (OSError, ValueError):  # a descriptor closed under us: the process is ending
            return
        now = time.monotonic()
        if wake_read in ready:
            try:
                woken = os.read(wake_read, 4096)
            except OSError:
                woken = b""
            if not woken:  # the pipe's write end was closed: a reset; this thread ends
                _close(wake_read, fifo)
                return
            due.watch = min(due.watch, now + state.watch_period)  # it may have shortened
        if fifo is not None and fifo[0] in ready:
            pending = _answer_requests(fifo, pending)
        due.run(now)


def _close(wake_read: int, fifo: tuple[int, Path] | None) -> None:
    for fd in (wake_read, None if fifo is None else fifo[0]):
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _answer_requests(fifo: tuple[int, Path], pending: bytes) -> bytes:
    try:
        pending += os.read(fifo[0], 4096)
    except OSError:
        return pending
    *lines, pending = pending.split(b"\n")
    for line in lines:
        with contextlib.suppress(Exception):  # a bad request never ends the thread
            stack_server.answer(fifo[1], json.loads(line))
    return pending


def report_stuck() -> None:
    """Write ``call.stuck`` for each call running past its ``stuck_after`` (and its doublings)."""
    state = worker_state.state
    running = list(state.running_calls.values())
    reports = state.stuck_reports
    if not running:
        reports.clear()
        return
    now = time.perf_counter()
    names: dict[int, str] | None = None
    alive = set()
    for call in running:
        key = id(call)
        alive.add(key)
        after = call.watch if call.watch is not None else state.stuck_after_default
        if not after or call.call_id is None:
            continue
        count, due = reports.get(key, (0, after))
        running_s = now - call.started
        if running_s < due:
            continue
        if names is None:
            from raytrace_kit._worker.snapshot import call_state  # noqa: PLC0415 -- seldom

            names = {t.ident: t.name for t in threading.enumerate() if t.ident is not None}
        stack, waiting = call_state(call)
        tail = encode.stuck_members(
            running_s, after, count + 1, names.get(call.thread), stack, waiting
        )
        writer.emit_call("call.stuck", "warning", call, tail)
        reports[key] = (count + 1, due * 2)
    for key in [key for key in reports if key not in alive]:
        del reports[key]

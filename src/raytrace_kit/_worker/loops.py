"""Async actors' event loops, watched from the kit's thread: a loop held by one call is named.

An ``async def`` method that blocks (``time.sleep``, a CPU loop, blocking I/O) holds its
actor's event loop: every other call of that actor waits, and nothing in Ray says why.
While async calls run, the kit's thread hands each loop a heartbeat (an empty callback,
``call_soon_threadsafe``) every :data:`LOOK_S`, and looks whether it ran. A heartbeat that
waited :data:`BLOCKED_S` or more means the loop is held: by the asyncio task running on it
then (:func:`asyncio.current_task` of that loop), at the line its thread is at (the
user's innermost frame: the blocking line). When the heartbeat finally runs, the held
turn ends, and a ``call.blocked`` event names the call, the line and how long the loop
waited (at least; the heartbeat's own wait). :func:`held_now` is what ``stuck()`` shows of
a turn still going. No heartbeat is sent while no async call runs: an idle actor is not
woken.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

from raytrace_kit._output import encode, writer
from raytrace_kit._output import state as output_state
from raytrace_kit._output.context import ActiveCall
from raytrace_kit._output.frames import in_stdlib
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker.waits import Frame, current_frame, thread_state

__all__ = ["BLOCKED_S", "LOOK_S", "held_now", "look", "started"]

LOOK_S = 0.05  # a heartbeat per loop this often, while async calls run
BLOCKED_S = 0.1  # a heartbeat waiting this long: the loop is held (a turn this long)


class _Turn:
    """One held turn of a loop: the call holding it, since when, where it was last seen."""

    __slots__ = ("call", "since", "stack", "thread")

    def __init__(self, call: ActiveCall | None, since: float, thread: str | None) -> None:
        self.call, self.since, self.thread = call, since, thread
        self.stack: list[Frame] = []


class Watched:
    """A loop of this process, and its heartbeat: sent when, ran when."""

    __slots__ = ("ident", "loop", "ran", "sent", "turn")

    def __init__(self, loop: asyncio.AbstractEventLoop, ident: int) -> None:
        self.loop, self.ident = loop, ident
        self.sent: float | None = None
        self.ran: float | None = None
        self.turn: _Turn | None = None

    def beat(self) -> None:
        """The heartbeat, run by the loop: it is not held (any more)."""
        self.ran = time.perf_counter()


def started(call: ActiveCall) -> None:
    """An async call began on this thread's loop: watch the loop, wake the kit's thread.

    On the call's path: a dictionary look-up, and a wake-up only when the kit's thread had
    stopped looking (no async call was running).
    """
    state = worker_state.state
    ident = call.thread
    if ident not in state.loops:
        with contextlib.suppress(RuntimeError):  # no running loop: nothing to watch
            state.loops[ident] = Watched(asyncio.get_running_loop(), ident)
    if state.loops_idle:
        state.loops_idle = False
        wake = output_state.state.wake
        if wake is not None:
            wake()


def look() -> bool:
    """One look at each loop (the kit's thread); whether to look again in :data:`LOOK_S`."""
    state = worker_state.state
    state.loops_idle = True  # before reading the calls: a call starting now wakes us
    calls = {
        id(task): call
        for call in list(state.running_calls.values())
        if (task := getattr(call, "task", None)) is not None
    }
    if calls:
        state.loops_idle = False
    now = time.perf_counter()
    again = bool(calls)
    for watched in list(state.loops.values()):
        if watched.loop.is_closed():
            del state.loops[watched.ident]
            continue
        ran, sent = watched.ran, watched.sent
        if sent is not None and ran is not None and ran >= sent:  # the loop ran it
            _end(watched, ran)
            watched.sent = sent = None
        if sent is None:
            if calls and _send(watched, now):
                again = True
            continue
        again = True
        if now - sent >= BLOCKED_S:
            _held(watched, calls, sent, now)
    return again


def _send(watched: Watched, now: float) -> bool:
    watched.sent, watched.ran = now, None
    try:
        watched.loop.call_soon_threadsafe(watched.beat)
    except RuntimeError:  # closed meanwhile
        watched.sent = None
        return False
    return True


def _held(watched: Watched, calls: dict[int, ActiveCall], sent: float, now: float) -> None:
    """The loop is held now: by which call (if one of ours), at which line."""
    task = asyncio.current_task(watched.loop)
    call = calls.get(id(task)) if task is not None else None
    turn = watched.turn
    if turn is not None and turn.call is not call:  # another callback holds it now
        _end(watched, now)
        turn = None
    if turn is None:
        names = {t.ident: t.name for t in threading.enumerate()}
        turn = watched.turn = _Turn(call, sent if call is None else max(sent, call.started),
                                    names.get(watched.ident))  # fmt: skip
    frame = current_frame(watched.ident)
    if frame is not None:  # the loop thread's own frames (threading's) are no one's line
        stack = [each for each in thread_state(frame)[0] if not in_stdlib(each[0])]
        if stack:
            turn.stack = stack


def _end(watched: Watched, when: float) -> None:
    """The held turn, if any, is over: its event, if it lasted :data:`BLOCKED_S`."""
    turn, watched.turn = watched.turn, None
    if turn is None or when - turn.since < BLOCKED_S:
        return
    tail = encode.blocked_members(when - turn.since, turn.thread, turn.stack)
    with contextlib.suppress(Exception):  # never ends the kit's thread
        if turn.call is not None:
            writer.emit_call("call.blocked", "warning", turn.call, tail)
        else:  # a callback that is no call of ours (the user's own, Ray's)
            fields = encode.blocked_fields(turn.stack, when - turn.since, turn.thread)
            writer.emit("loop.blocked", "warning", fields)


def held_now() -> list[dict[str, Any]]:
    """The loops held now, for ``stuck()``: the call, for how long, at which line."""
    now = time.perf_counter()
    found = []
    for watched in list(worker_state.state.loops.values()):
        turn, sent = watched.turn, watched.sent
        if turn is None or sent is None:
            continue
        call = turn.call
        found.append({
            "call_id": None if call is None else call.call_id,
            "function": None if call is None else call.spec_fields["function"],
            "held_s": round(now - turn.since, 3),
            "thread": turn.thread,
            "stack": [list(frame) for frame in turn.stack],
        })  # fmt: skip
    return found

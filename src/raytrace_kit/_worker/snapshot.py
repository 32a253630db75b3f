"""This process's calls in flight, as ``stuck()`` asks for them: where each is, what it waits on.

Taken by the kit's thread on request (see :mod:`.watch`): the instrumented calls running
here, each with its user frames (its thread's stack, or its coroutine's chain of awaits)
and the calls it waits on; and the threads blocked in ``ray.get``/``ray.wait`` outside any
call (a driver's main thread, a thread the user started). Submission records waiting in
memory are written first, so the files the node's reader reads next have them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from raytrace_kit import _process
from raytrace_kit._output import encode, submissions
from raytrace_kit._output.context import ActiveCall
from raytrace_kit._worker import loops
from raytrace_kit._worker import state as worker_state
from raytrace_kit._worker.waits import (
    Frame,
    coroutine_state,
    current_frame,
    in_kit,
    thread_state,
)

__all__ = ["call_state", "snapshot"]


def call_state(call: ActiveCall) -> tuple[list[Frame], dict[str, Any] | None]:
    """Where ``call`` is now (the user's frames) and what it waits on, if anything."""
    task = getattr(call, "task", None)
    if task is not None:  # an async call: its coroutine, not a thread, holds its frames
        return coroutine_state(task)
    frame = current_frame(call.thread)
    if frame is None:
        return [], None
    return thread_state(frame)


def snapshot() -> dict[str, Any]:
    """This process's identity, its running calls and its threads blocked outside calls."""
    submissions.flush()
    identity = _process.process_identity()
    names = {t.ident: t.name for t in threading.enumerate() if t.ident is not None}
    now, wall = time.perf_counter(), time.time()
    calls = []
    in_calls: set[int] = set()
    for call in list(worker_state.state.running_calls.values()):
        if call.call_id is None:  # log=False: no ids to name it by
            continue
        stack, waiting = call_state(call)
        if getattr(call, "task", None) is None:
            in_calls.add(call.thread)
        parent_call, _, parent_task = (call.parent or "").partition("/")
        calls.append(
            {
                "call_id": call.call_id,
                "function": call.spec_fields["function"],
                "kind": call.spec_fields["kind"],
                "operator": call.spec_fields.get("operator"),  # a Ray Data UDF's
                "mode": call.mode,
                "task_id": call.task_id,
                "actor_id": call.actor_id,
                "attempt": call.attempt,
                "parent_call_id": parent_call or None,
                "parent_task_id": parent_task or None,
                "started": encode.stamp(wall - (now - call.started)),
                "running_s": round(now - call.started, 3),
                "thread": names.get(call.thread),
                "async": getattr(call, "task", None) is not None,
                "stack": stack,
                "waiting_on": waiting,
            }
        )
    waits = []
    me = threading.get_ident()
    for ident, name in names.items():
        if ident == me or ident in in_calls:
            continue
        frame = current_frame(ident)
        if frame is None or in_kit(frame):  # the kit's own (stuck() asking, say): not a wait
            continue
        stack, waiting = thread_state(frame)
        if waiting is not None:
            waits.append({"thread": name, "stack": stack, "waiting_on": waiting})
    return {
        "pid": identity.pid,
        "node_id": identity.node_id,
        "job_id": identity.job_id,
        "worker_id": identity.worker_id,
        "is_worker": identity.is_worker,
        "calls": calls,
        "waits": waits,
        "loops_held": loops.held_now(),
    }

"""``stacks(handle)``: the stacks of every thread of a debuggable actor, even while it is busy.

A small helper task runs on the actor's node and asks the actor's stacks server (see
:mod:`raytrace_kit._worker.stacks`) through a named pipe in that node's log dir.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._driver.actor_class import DebuggableActorClass
from raytrace_kit._local.handles import LocalActorHandle
from raytrace_kit._worker.stack_server import NoStacksServerError, read_stacks
from raytrace_kit._worker.stacks import ProcessStacks, process_stacks
from raytrace_kit.exceptions import InvalidTargetError

__all__ = ["stacks"]

# While an actor is being created or restarted it has no process to ask yet; just after
# .remote() the GCS may not know it at all ("MISSING").
_WAITING_STATES = frozenset({"MISSING", "DEPENDENCIES_UNREADY", "PENDING_CREATION", "RESTARTING"})


@_registry.cleared_on_reset
@functools.cache
def _helper() -> Any:
    # num_cpus=0: it must run even on a node whose CPUs the busy actor holds.
    remote = _ray_compat.ray_remote(num_cpus=0, max_retries=0)
    return _ray_compat.mark_kit_remote(remote(read_stacks))


def stacks(handle: Any, timeout: float = 30, *, all_frames: bool = False) -> ProcessStacks:
    """The Python stack of every thread of an actor of a debuggable class, now.

    Works while the actor is busy (or stuck) in a long call, in Python or in C code that
    releases the GIL (``time.sleep``, a lock, a socket read). No py-spy, ptrace, root or
    network port needed; the actor's own threads are not touched. Each thread says which
    instrumented call it is running (call id, function, task id) and for how long.

    Args:
        handle: An ``ActorHandle`` of a debuggable actor class (a local actor's handle in
            local mode gives this process's stacks).
        timeout: Seconds to wait for the answer.
        all_frames: Show Ray's and raytrace_kit's own frames too (hidden by default).

    Returns:
        A :class:`ProcessStacks`; ``print()`` it for a traceback-like dump.

    Raises:
        InvalidTargetError: ``handle`` is not the handle of a live actor of a debuggable
            class (a ``TypeError``).
        TimeoutError: No answer within ``timeout`` seconds.
    """
    if isinstance(handle, LocalActorHandle):  # it lives here: this process's threads
        return process_stacks(all_frames=all_frames, include_caller=True)
    if isinstance(handle, type | DebuggableActorClass | _ray_compat.ActorClass):
        msg = (
            "stacks() takes an actor handle, not the actor class: create the actor first, "
            "handle = Cls.remote(...), then stacks(handle)."
        )
        raise InvalidTargetError(msg)
    if not isinstance(handle, ray.actor.ActorHandle):
        msg = (
            f"stacks() needs the handle of an actor of a @debuggable class (or use a pinned "
            f"function's f.stacks()); got {type(handle).__name__}."
        )
        raise InvalidTargetError(msg)
    deadline = time.monotonic() + timeout
    node_id, pid = _locate(handle, deadline)
    helper = _helper().options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
    )
    remaining = max(deadline - time.monotonic(), 0.1)
    try:
        return ray.get(  # type: ignore[no-any-return]
            helper.remote(node_id, pid, all_frames, remaining), timeout=remaining + 5
        )
    except NoStacksServerError:
        msg = (
            f"stacks() needs an actor of a @debuggable class: the actor's process {pid} "
            "serves no stacks. Decorate its class with @debuggable."
        )
        raise InvalidTargetError(msg) from None
    except ray.exceptions.GetTimeoutError:
        msg = f"the actor's process {pid} did not answer within {timeout} s"
        raise TimeoutError(msg) from None


def _locate(handle: Any, deadline: float) -> tuple[str, int]:
    actor_id = _ray_compat.actor_id_of(handle)
    while True:
        state, node_id, pid = _ray_compat.actor_location(actor_id)
        if state == "ALIVE" and node_id and pid:
            return node_id, pid
        if state not in _WAITING_STATES or time.monotonic() > deadline:
            msg = f"stacks(): actor {actor_id} is {state.lower()}, so it has no stacks to show."
            raise InvalidTargetError(msg)
        time.sleep(0.05)

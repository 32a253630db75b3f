"""``stacks(handle)``: ask an actor of a debuggable class for the stacks of its threads."""

from __future__ import annotations

from typing import Any

import ray

from raytrace_kit._worker.stacks import ProcessStacks
from raytrace_kit.exceptions import InvalidTargetError

__all__ = ["stacks"]


def stacks(handle: Any, timeout: float = 30) -> ProcessStacks:
    """The Python stack of every thread of an actor of a debuggable class, now.

    Answered on a concurrency group of its own, so it works while the actor is busy (or
    stuck) in a long call. No py-spy, ptrace or root needed.

    Args:
        handle: An ``ActorHandle`` of a debuggable actor class.
        timeout: Seconds to wait for the answer.

    Returns:
        A :class:`ProcessStacks`; ``print()`` it for a traceback-like dump.

    Raises:
        InvalidTargetError: ``handle`` is not the handle of an actor of a debuggable class
            (a ``TypeError``).
    """
    method = getattr(handle, "__raytrace_stacks__", None)
    if method is None:
        msg = (
            f"stacks() needs the handle of an actor of a @debuggable class (or use a pinned "
            f"function's f.stacks()); got {type(handle).__name__}, which has no stacks support."
        )
        raise InvalidTargetError(msg)
    return ray.get(method.remote(), timeout=timeout)  # type: ignore[no-any-return]

"""What a running call waits on, and where it is: read from its thread's frames or its coroutine.

Nothing is recorded while calls run. When asked (a ``stuck()`` snapshot, the watch that
reports stuck calls), the kit's thread reads what the frames hold:

- a thread blocked in ``ray.get``/``ray.wait`` has Ray's function on its stack, with the
  refs as its argument;
- a coroutine suspended in ``await ref`` (or ``await asyncio.gather(*refs)``, or
  ``await actor.method.remote()``) awaits a chain of coroutines ending in an asyncio
  future that Ray made for the ref.

A ref's first 24 bytes are the id of the task that produces it, so "waits on these refs"
is "waits on these calls".
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import Any

import ray

from raytrace_kit import _ray_compat

__all__ = [
    "MAX_TASK_IDS",
    "Frame",
    "coroutine_state",
    "current_frame",
    "in_kit",
    "thread_state",
    "user_frames",
]

MAX_TASK_IDS = 1000  # per wait: enough to name what it waits on, bounded for a huge gather
_MAX_STEPS = 64  # links followed down one coroutine chain

# Frames from these directories are not the user's: Ray's, the kit's, asyncio's.
_NOT_USERS = (
    str(Path(ray.__file__).parent) + os.sep,
    str(Path(__file__).parents[1]) + os.sep,  # raytrace_kit
    str(Path(asyncio.__file__).parent) + os.sep,
)

Frame = tuple[str, int, str, str]  # (file, line, function, source line)


def user_frames(frames: Iterable[FrameType]) -> list[Frame]:
    """``frames`` (outermost first) as ``(file, line, function, source)``, the user's only."""
    summary = traceback.StackSummary.extract(
        ((frame, frame.f_lineno or 0) for frame in frames), lookup_lines=True
    )
    return [
        (entry.filename, entry.lineno or 0, entry.name, (entry.line or "").strip())
        for entry in summary
        if not entry.filename.startswith(_NOT_USERS)
    ]


def _outermost_first(frame: FrameType | None) -> list[FrameType]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    return frames


def _waiting(kind: str, refs: Any) -> dict[str, Any]:
    """The ``waiting_on`` of a call: what it is in, how many refs, the tasks behind them."""
    if isinstance(refs, ray.ObjectRef) or not isinstance(refs, Iterable):
        refs = [refs]
    task_ids: list[str] = []
    count = 0
    for ref in refs:
        count += 1
        if len(task_ids) < MAX_TASK_IDS:
            task_id = _task_id(ref)
            if task_id is not None:
                task_ids.append(task_id)
    return {"what": kind, "refs": count, "task_ids": task_ids}


def _task_id(ref: Any) -> str | None:
    if isinstance(ref, ray.ObjectRef):
        return ref.task_id().hex()  # type: ignore[no-any-return]
    if isinstance(ref, ray.ObjectRefGenerator):
        return _ray_compat.generator_task_id(ref)
    return None


def thread_state(frame: FrameType) -> tuple[list[Frame], dict[str, Any] | None]:
    """The user's frames of a thread (innermost ``frame``), and the ray.get/wait it is in."""
    frames = _outermost_first(frame)
    waiting = None
    for each in reversed(frames):  # innermost first: Ray's get is near the top
        found = _ray_compat.blocked_in(each)
        if found is not None:
            waiting = _waiting(*found)
            break
    return user_frames(frames), waiting


def coroutine_state(task: Any) -> tuple[list[Frame], dict[str, Any] | None]:
    """The user's frames of a suspended asyncio task's coroutines, and the refs it awaits.

    Follows the chain of awaits from the task's coroutine down (``cr_await``; through
    Ray's and asyncio's wrappers by the objects they hold) to the future it is suspended
    on: a ref's future names the ref, ``gather``'s names its children's.
    """
    frames: list[FrameType] = []
    found: list[Any] = []
    _follow(task.get_coro(), frames, found, _MAX_STEPS)
    waiting = _waiting("await", found) if found else None
    return user_frames(frames), waiting


def _follow(link: Any, frames: list[FrameType], found: list[Any], steps: int) -> int:
    """Walk one await chain from ``link``; refs go to ``found``. Returns the steps left."""
    seen: set[int] = set()
    while link is not None and steps > 0 and id(link) not in seen:
        seen.add(id(link))
        steps -= 1
        frame = getattr(link, "cr_frame", None) or getattr(link, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        if isinstance(link, asyncio.Future):
            return _from_future(link, frames, found, steps)
        following = getattr(link, "cr_await", None)
        if following is None:
            following = getattr(link, "gi_yieldfrom", None)
        if following is None and frame is None:  # a wrapper in C: what it holds
            following = next(
                (r for r in gc.get_referents(link) if _awaitable(r)),
                None,
            )
        link = following
    return steps


def _from_future(
    future: asyncio.Future[Any], frames: list[FrameType], found: list[Any], steps: int
) -> int:
    ref = _ray_compat.ref_of_future(future)
    if ref is not None:
        found.append(ref)
        return steps
    if isinstance(future, asyncio.Task):  # `await task`: what that task awaits
        return _follow(future.get_coro(), frames, found, steps)
    for child in getattr(future, "_children", None) or ():  # asyncio.gather's
        if steps <= 0:
            break
        before = len(frames)
        steps = _follow(child, frames, found, steps)
        del frames[before:]  # the children's own frames are gather's, not the call's
    return steps


def _awaitable(value: Any) -> bool:
    return (
        isinstance(value, asyncio.Future)
        or hasattr(value, "cr_await")
        or hasattr(value, "gi_yieldfrom")
        or type(value).__name__ in {"FutureIter", "coroutine_wrapper"}
    )


_KIT = str(Path(__file__).parents[1]) + os.sep


def in_kit(frame: FrameType | None) -> bool:
    """Whether a thread whose innermost frame is ``frame`` is running the kit's own code.

    Its threads (``stuck()`` waiting on its node tasks, say) wait on calls of their own,
    not the user's.
    """
    while frame is not None:
        if frame.f_code.co_filename.startswith(_KIT):
            return True
        frame = frame.f_back
    return False


def current_frame(ident: int) -> FrameType | None:
    """The innermost frame of thread ``ident`` now, or ``None`` if it has ended."""
    return sys._current_frames().get(ident)

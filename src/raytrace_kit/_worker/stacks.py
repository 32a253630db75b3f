"""Live stacks of a process: every thread's Python frames, read by a method of the actor itself.

Every debuggable actor class, and a pinned function's runner, answers
``__raytrace_stacks__`` on a concurrency group of its own (:data:`DEBUG_GROUP`), so the
answer comes even while the actor is busy in a long call.
"""

from __future__ import annotations

import inspect
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import ray

from raytrace_kit import _process

__all__ = [
    "DEBUG_GROUP",
    "ProcessStacks",
    "ThreadStack",
    "add_stacks_support",
    "in_debug_group",
    "process_stacks",
    "with_debug_group",
]

# The concurrency group that answers stacks() while the default group is busy.
DEBUG_GROUP = "raytrace_debug"


_F = TypeVar("_F", bound=Callable[..., Any])


def in_debug_group(fn: _F) -> _F:
    """``@ray.method(concurrency_group=DEBUG_GROUP)``, typed."""
    return ray.method(concurrency_group=DEBUG_GROUP)(fn)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class ThreadStack:
    """The Python stack of one thread, outermost frame first.

    Attributes:
        name: The thread's name.
        ident: The thread's identifier.
        frames: ``(filename, line number, function, source line)`` per frame.
    """

    name: str
    ident: int
    frames: tuple[tuple[str, int, str, str], ...]

    def functions(self) -> list[str]:
        """The function names of the frames, outermost first."""
        return [frame[2] for frame in self.frames]


@dataclass(frozen=True, slots=True)
class ProcessStacks:
    """The stacks of every thread of one process, at one moment.

    Attributes:
        pid: The process.
        node_id: Its node.
        threads: One :class:`ThreadStack` per thread.
    """

    pid: int
    node_id: str | None
    threads: tuple[ThreadStack, ...]

    def __str__(self) -> str:
        lines = [f"Python stacks of pid {self.pid} on node {self.node_id}"]
        for thread in self.threads:
            lines.append(f'\nThread "{thread.name}" ({thread.ident}), most recent call last:')
            for filename, lineno, function, source in thread.frames:
                lines.append(f'  File "{filename}", line {lineno}, in {function}')
                if source:
                    lines.append(f"    {source}")
        return "\n".join(lines)

    def find(self, function: str) -> ThreadStack | None:
        """The first thread whose stack contains a frame of ``function``."""
        return next((t for t in self.threads if function in t.functions()), None)


def process_stacks() -> ProcessStacks:
    """The stacks of every thread of this process, now (``sys._current_frames``)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    threads = []
    for ident, frame in sys._current_frames().items():
        if ident == me:
            continue  # the thread answering this request
        summary = traceback.extract_stack(frame)
        threads.append(
            ThreadStack(
                names.get(ident, f"thread-{ident}"),
                ident,
                tuple((f.filename, f.lineno or 0, f.name, f.line or "") for f in summary),
            )
        )
    identity = _process.process_identity()
    return ProcessStacks(identity.pid, identity.node_id, tuple(threads))


def _stacks_method() -> Any:
    def __raytrace_stacks__(self: Any) -> ProcessStacks:  # noqa: N807 -- a Ray method name
        return process_stacks()

    return in_debug_group(__raytrace_stacks__)


def _async_stacks_method() -> Any:
    async def __raytrace_stacks__(self: Any) -> ProcessStacks:  # noqa: N807 -- async actors need async methods
        return process_stacks()

    return in_debug_group(__raytrace_stacks__)


def add_stacks_support(cls: type) -> None:
    """Give an (instrumented) actor class ``__raytrace_stacks__``, in :data:`DEBUG_GROUP`.

    Async actors get an async method: Ray runs each group of an async actor on an event
    loop of its own, so it answers while the default loop is busy.
    """
    is_async = any(
        inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
        for _, member in inspect.getmembers(cls, inspect.isfunction)
    )
    method = _async_stacks_method() if is_async else _stacks_method()
    method.__qualname__ = f"{cls.__qualname__}.__raytrace_stacks__"
    cls.__raytrace_stacks__ = method  # type: ignore[attr-defined]


def with_debug_group(ray_options: dict[str, Any]) -> dict[str, Any]:
    """Actor options with :data:`DEBUG_GROUP` added to the user's concurrency groups."""
    groups = dict(ray_options.get("concurrency_groups") or {})
    groups.setdefault(DEBUG_GROUP, 1)
    return {**ray_options, "concurrency_groups": groups}

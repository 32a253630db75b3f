"""Pinning for debugging: one dedicated process per function, node pins, and live stacks.

A pinned function's calls all run in one actor process (the "runner"), created lazily on
the first call with the function's resources, one call at a time in submission order, so a
debugger or profiler can stay attached to it. Every debuggable actor class, and the
runner, answers :func:`stacks` on a concurrency group of its own, so the answer comes even
while the actor is busy in a long call.
"""

from __future__ import annotations

import inspect
import sys
import threading
import traceback
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytrace_kit import _execute, _identity
from raytrace_kit._execute import CallSpec
from raytrace_kit._options import Pin
from raytrace_kit.exceptions import NodeNotFoundError

__all__ = [
    "DEBUG_GROUP",
    "PinnedWorker",
    "ProcessStacks",
    "ThreadStack",
    "check_node",
    "node_affinity",
    "process_stacks",
    "stacks",
]

# The concurrency group that answers stacks() while the default group is busy.
DEBUG_GROUP = "raytrace_debug"


def node_affinity(node_id: str) -> NodeAffinitySchedulingStrategy:
    """Hard node affinity: the call or actor runs on that node or not at all."""
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)


def check_node(node_id: str) -> None:
    """Fail at submission if ``node_id`` is not a live node of the cluster.

    Raises:
        NodeNotFoundError: The node does not exist or is dead; the message lists the
            live ones.
    """
    nodes = ray.nodes()
    alive = [n["NodeID"] for n in nodes if n.get("Alive")]
    if node_id in alive:
        return
    state = "is dead" if any(n["NodeID"] == node_id for n in nodes) else "does not exist"
    msg = (
        f"cannot pin to node {node_id}: it {state} in this cluster. "
        f"Live nodes: {', '.join(alive) or 'none'}."
    )
    raise NodeNotFoundError(msg)


_F = TypeVar("_F", bound=Callable[..., Any])


def _in_debug_group(fn: _F) -> _F:
    """``@ray.method(concurrency_group=DEBUG_GROUP)``, typed."""
    return ray.method(concurrency_group=DEBUG_GROUP)(fn)  # type: ignore[no-any-return]


# --- live stacks ---------------------------------------------------------------------------


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
    identity = _identity.process_identity()
    return ProcessStacks(identity.pid, identity.node_id, tuple(threads))


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
        TypeError: The actor's class is not debuggable (it has no stacks support).
    """
    method = getattr(handle, "__raytrace_stacks__", None)
    if method is None:
        msg = (
            "stacks() needs an actor of a @debuggable class (or a pinned function's "
            "f.stacks()); this handle's class has no stacks support."
        )
        raise TypeError(msg)
    return ray.get(method.remote(), timeout=timeout)  # type: ignore[no-any-return]


def _stacks_method() -> Any:
    def __raytrace_stacks__(self: Any) -> ProcessStacks:  # noqa: N807 -- a Ray method name
        return process_stacks()

    return _in_debug_group(__raytrace_stacks__)


def _async_stacks_method() -> Any:
    async def __raytrace_stacks__(self: Any) -> ProcessStacks:  # noqa: N807 -- async actors need async methods
        return process_stacks()

    return _in_debug_group(__raytrace_stacks__)


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


# --- the runner of a pinned function -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PinnedWorker:
    """Where a pinned function's process lives: attach py-spy, debugpy or an IDE to it.

    Attributes:
        node_id: The node, in hex.
        node_ip: The node's IP address.
        pid: The process id.
        worker_id: Ray's worker id, in hex.
        actor_id: The id of the actor that runs the calls, in hex.
    """

    node_id: str
    node_ip: str
    pid: int
    worker_id: str
    actor_id: str


class PinnedRunner:
    """The actor that runs every call of one pinned function, in its own process."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        # Specs are sent once each and named by a small key in every call, so a call does
        # not pickle its settings: calls stay as cheap as a hand-written actor's.
        self.specs: dict[int, CallSpec] = {}

    def register(self, key: int, spec: CallSpec) -> None:
        """Remember the spec of calls made with ``key`` (sent before them, in order)."""
        self.specs[key] = spec

    def call(self, _raytrace_spec: int, *args: Any, **kwargs: Any) -> Any:
        """Run one call (Ray resolved the top-level refs in ``args`` already)."""
        spec = self.specs[_raytrace_spec]
        return _execute.run(spec, self.fn, args, kwargs, mode="pinned")

    def call_generator(
        self, _raytrace_spec: int, *args: Any, **kwargs: Any
    ) -> Generator[Any, Any, Any]:
        """Run one call of a generator function: a streaming generator, as a task's."""
        spec = self.specs[_raytrace_spec]
        for item in _execute.run_generator(spec, self.fn, args, kwargs, mode="pinned"):  # noqa: UP028 -- Ray sends into generators
            yield item

    @_in_debug_group
    def where(self) -> PinnedWorker:
        """This process's location."""
        ctx = ray.get_runtime_context()
        return PinnedWorker(
            node_id=ctx.get_node_id(),
            node_ip=ray.util.get_node_ip_address(),
            pid=_identity.process_identity().pid,
            worker_id=ctx.get_worker_id(),
            actor_id=ctx.get_actor_id() or "",
        )

    @_in_debug_group
    def __raytrace_stacks__(self) -> ProcessStacks:
        """The stacks of this process, even while a call is running."""
        return process_stacks()


# Task options that also make sense for the runner actor (its resources and placement).
_RUNNER_OPTIONS = (
    "num_cpus",
    "num_gpus",
    "resources",
    "memory",
    "accelerator_type",
    "runtime_env",
    "scheduling_strategy",
    "label_selector",
)


def runner_options(task_options: dict[str, Any], pin: Pin) -> dict[str, Any]:
    """Actor options for the runner of a function with these task options."""
    options = {k: task_options[k] for k in _RUNNER_OPTIONS if task_options.get(k) is not None}
    options.setdefault("num_cpus", 1)  # what a task reserves by default, kept for fidelity
    if pin.node_id is not None:
        options["scheduling_strategy"] = node_affinity(pin.node_id)
    retries = task_options.get("max_retries")
    options["max_restarts"] = -1  # a crashed runner comes back; retries bound the calls
    options["max_task_retries"] = 3 if retries is None else retries
    options["concurrency_groups"] = {DEBUG_GROUP: 1}
    return options


def call_options(task_options: dict[str, Any], generator: bool) -> dict[str, Any]:
    """Per-call options for a runner method, from the function's task options."""
    options: dict[str, Any] = {}
    num_returns = task_options.get("num_returns")
    if num_returns is not None:
        options["num_returns"] = num_returns
    elif generator:
        options["num_returns"] = "streaming"
    if task_options.get("retry_exceptions") is not None:
        options["retry_exceptions"] = task_options["retry_exceptions"]
    return options

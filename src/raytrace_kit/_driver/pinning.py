"""``pin=``: node affinity, and the runner actor that runs all calls of a pinned function.

A pinned function's calls all run in one actor process (the "runner", see
:mod:`raytrace_kit._worker.runner`), created lazily on the first call with the function's
resources, one call at a time in submission order, so a debugger or profiler can stay
attached to it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from raytrace_kit import _process, _ray_compat
from raytrace_kit._options import CallSpec, DebugOptions, Pin
from raytrace_kit._worker.runner import PinnedRunner, PinnedWorker
from raytrace_kit.exceptions import NodeNotFoundError

__all__ = [
    "RunnerSlot",
    "call_options",
    "check_node",
    "node_affinity",
    "runner_options",
]


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


class RunnerSlot:
    """The runner of one pinned function, per Ray connection, and the specs it knows.

    Shared by every proxy derived from one decorated function. Specs are registered once
    each and named by a small key in every call, so a call does not pickle its settings.
    """

    __slots__ = ("_lock", "name", "runner", "specs", "where")  # specs: DebugOptions -> key

    def __init__(self, name: str) -> None:
        # The runner is a named actor: every copy of the proxy (in tasks, after pickling)
        # finds the same process by this name, which travels with the proxy.
        self.name = name
        # (the identity of the Ray connection it belongs to, the runner's handle)
        self.runner: tuple[_process.ProcessIdentity, Any] | None = None
        self.specs: dict[DebugOptions, int] = {}
        # The runner's answer to where(), asked first thing, before any call queues.
        self.where: Any = None
        self._lock = threading.Lock()

    def handle(
        self, python_function: Any, task_options: dict[str, Any], pin: Pin, spec: CallSpec
    ) -> Any:
        """The runner's handle, created on first use for this Ray connection, with ``spec``."""
        identity = _process.process_identity()
        cached = self.runner
        if cached is not None and cached[0] is identity:
            return cached[1]  # the common case, without the lock
        with self._lock:
            cached = self.runner
            if cached is not None and cached[0] is identity:
                return cached[1]
            try:
                handle = ray.get_actor(self.name)
                specs: dict[DebugOptions, int] = {}  # made elsewhere: send specs by value
            except ValueError:
                options = runner_options(task_options, pin)
                runner_class = _ray_compat.mark_kit_remote(
                    _ray_compat.ray_remote(**options)(PinnedRunner)
                ).options(name=self.name, get_if_exists=True)
                # Made here with this spec (unless another process won a race to create it,
                # when key 0 may name another process's spec: instrumentation options only).
                handle = runner_class.remote(python_function, spec)
                specs = {spec.options: 0}
            self.where = handle.where.remote()
            self.runner = (identity, handle)
            self.specs = specs
            return handle

    def location(self, handle: Any) -> PinnedWorker:
        """Where the runner lives; asked again (after queued calls) if it was restarted."""
        worker: PinnedWorker = ray.get(self.where)
        _state, _node, pid = _ray_compat.actor_location(_ray_compat.actor_id_of(handle))
        if pid and pid != worker.pid:
            self.where = handle.where.remote()
            worker = ray.get(self.where)
        return worker

    def spec_key(self, spec: CallSpec) -> int | CallSpec:
        """What a call passes to name its spec: the runner's own key, or the spec itself.

        Only the spec the runner was created with has a key: it survives a restart, as
        Ray runs ``__init__`` again with the same arguments. Other specs travel by value.
        """
        key = self.specs.get(spec.options)
        return spec if key is None else key

    def end(self) -> None:
        """Kill the runner (if this connection has one); the next call starts a new one."""
        with self._lock:
            cached, self.runner = self.runner, None
        if cached is not None and cached[0] is _process.process_identity():
            ray.kill(cached[1])
            # The name is free once Ray has the actor dead: wait, so that the next call
            # starts a new runner instead of finding the dying one.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    ray.get_actor(self.name)
                except ValueError:
                    break
                time.sleep(0.02)

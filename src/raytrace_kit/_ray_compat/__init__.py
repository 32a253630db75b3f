"""Every use of Ray's private API, in one place: a Ray upgrade is this one file to check.

Each function says what private member it reads, why no public one does, and where Ray
2.40 to 2.60 differ (public API: ``_ray_versions.py``); the rest uses only public API.
"""

from __future__ import annotations

import functools
import logging
import types
from collections.abc import Callable
from typing import Any

import ray
import ray._private.state
import ray._private.utils
import ray._private.worker
import ray.cloudpickle
import ray.util
from ray.actor import ActorClass
from ray.remote_function import RemoteFunction

from raytrace_kit import _registry
from raytrace_kit._ray_patches import (
    RAY_OWN,
    TAKEN,
    attribute_owner,
    is_kit_patch,
    is_kit_remote,
    is_taken,
    mark_kit_remote,
    patch,
    patched,
)

__all__ = [
    "RAY_OWN",
    "TAKEN",
    "ActorClass",
    "CloudPickler",
    "RemoteFunction",
    "accepts_keyword",
    "actor_creation_task_id",
    "actor_id_of",
    "actor_location",
    "actor_method_class",
    "actor_method_submit",
    "actor_of_method",
    "actor_subclass",
    "attribute_owner",
    "available_per_node",
    "blocked_in",
    "check_function_size",
    "connection_key",
    "current_actor_id",
    "current_task",
    "default_options_of",
    "generator_task_id",
    "is_kit_patch",
    "is_kit_remote",
    "is_taken",
    "is_worker_process",
    "keyword_of",
    "machine_resources",
    "mark_kit_remote",
    "patch",
    "patched",
    "python_class_of",
    "python_function_of",
    "ray_remote",
    "ray_worker",
    "ref_of_future",
    "remote_name",
    "replace_actor_executors",
    "session_location",
    "token_auth_for_attach",
]

# Ray's pickler, subclassed by local mode to keep in-process objects as themselves.
CloudPickler: Any = ray.cloudpickle.CloudPickler


# Ray's own ray.remote, from the module that defines it: the public name may be replaced
# later (tracing agents wrap it; so may a user's own instrumentation), and the kit, which
# makes remote functions and actor classes of its own, must not go through a wrapper that
# could call the kit again.
ray_remote: Any = ray._private.worker.remote


def check_function_size(pickled: bytes, name: str, kind: str) -> None:
    """Ray's check on a pickled function or class: too large raises Ray's ``ValueError``.

    ``kind`` is Ray's word for it: ``"remote function"`` or ``"actor"``.

    Raises:
        ValueError: Larger than ``FUNCTION_SIZE_ERROR_THRESHOLD``, with Ray's message.
    """
    ray._private.utils.check_oversized_function(pickled, name, kind, None)


def actor_method_class() -> Any:
    """Ray's ``ActorMethod`` (what ``handle.method`` is), whose ``_remote`` submits a call."""
    return ray.actor.ActorMethod


def actor_method_submit(cls: Any) -> Callable[..., Any]:
    """``ActorMethod._remote``: the one place every actor method call is submitted.

    No public hook sees a method call's keyword arguments before Ray serializes them; the
    parents hook (``_worker/parents.py``) wraps this to add the submitting call's id.
    """
    return cls._remote  # type: ignore[no-any-return]


def accepts_keyword(method: Any, name: str) -> bool:
    """Whether the actor method behind ``method`` (an ``ActorMethod``) takes ``name``."""
    return keyword_of(method, name) is not None


def keyword_of(method: Any, name: str) -> Any:
    """The ``inspect.Parameter`` ``name`` of the actor method behind ``method``, or ``None``.

    An ``ActorMethod`` keeps the method's signature (``_signature``, a list of parameters)
    to check calls against; it travels with every handle.
    """
    signature = getattr(method, "_signature", None)
    if signature is None:  # Ray 2.40 (2.41 added it): the handle keeps them, by method
        kept = getattr(actor_of_method(method), "_ray_method_signatures", None) or {}
        signature = kept.get(method._method_name)
    for parameter in signature or ():
        if parameter.name == name:
            return parameter
    return None


def actor_of_method(method: Any) -> Any:
    """The ``ActorHandle`` an ``ActorMethod`` calls (``_actor``), ``None`` if it is gone."""
    if hasattr(method, "_actor_ref"):  # Ray 2.40 and 2.44 hold it weakly
        return method._actor_hard_ref or method._actor_ref()
    return getattr(method, "_actor", None)


def _global_worker() -> Any:
    return ray._private.worker.global_worker


def ray_worker() -> Any:
    """Ray's worker object of this process (what ``RuntimeContext`` is built on)."""
    return ray._private.worker.global_worker


def remote_name(remote: Any) -> str:
    """``module.qualname`` of what a ``RemoteFunction`` or ``ActorClass`` was made from."""
    try:
        made_from: Any = (
            remote._function if isinstance(remote, RemoteFunction) else python_class_of(remote)
        )
    except Exception:
        return repr(remote)
    return f"{made_from.__module__}.{made_from.__qualname__}"


def connection_key(pid: int) -> tuple[object, ...] | None:
    """What identifies this process's current Ray connection, or ``None`` if not connected.

    The session name and core worker change with every ``ray.init()``; no public getter
    tells a driver that it has reconnected (``ray.is_initialized()`` is only a bool).
    """
    worker = _global_worker()
    if not worker.connected:
        return None
    return (pid, worker.node.session_name, id(worker.core_worker))


def is_worker_process() -> bool:
    """Whether this process is a Ray worker (not a driver): the mode has no public getter."""
    return bool(_global_worker().mode == ray.WORKER_MODE)


def current_task() -> tuple[str | None, int, str | None]:
    """``(task id in hex, attempt number, Ray's name)`` of the task running in this thread.

    Read straight from Ray's worker: ``ray.get_runtime_context()`` builds a context object
    each time, and has no getter for the attempt; this runs on every instrumented call.
    The task id is ``None`` outside tasks; the name is ``.options(name=...)``, else the
    function's; ``None`` on Ray 2.40, which has no getter for it (2.41 added one).
    """
    worker = _global_worker()
    task = worker.current_task_id
    return (
        None if task.is_nil() else task.hex(),
        int(worker.core_worker.get_current_task_attempt_number()),
        getattr(worker, "current_task_name", None) or None,
    )


def session_location() -> tuple[str, str]:
    """``(temp dir, session name)`` of Ray here: what Ray 2.54's public getters read."""
    node = _global_worker().node
    return str(node.get_temp_dir_path()), str(node.session_name)


def current_actor_id() -> str | None:
    """The id of the actor this process hosts, in hex (``None`` if none), as above."""
    actor = _global_worker().actor_id
    return None if actor.is_nil() else actor.hex()


def actor_id_of(handle: Any) -> str:
    """The id of the actor behind an ``ActorHandle``, in hex (``_actor_id``).

    Public getters exist only inside the actor (``get_runtime_context().get_actor_id()``).
    """
    return handle._actor_id.hex()  # type: ignore[no-any-return]


def token_auth_for_attach() -> None:
    """Send this machine's Ray token when attaching to a cluster, as Ray's own CLI does.

    A local cluster started with token authentication (the default in Ray 2.60) keeps its
    token in ``~/.ray/auth_token``; a process that only attaches (``ray.init(address=...)``
    from a shell where ``RAY_AUTH_MODE`` is unset) sends it only once token mode is on.
    Ray's helper for that (``maybe_enable_token_auth_if_token_available``) sets the mode
    and refreshes Ray's cached config; its notice is kept quiet. Rays without token
    authentication have no such helper: nothing to do. The token itself is never read here.
    """
    try:
        from ray._private.authentication import authentication_token_setup as setup  # noqa: PLC0415
    except ImportError:
        return
    quiet = logging.getLogger(setup.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        setup.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        quiet.setLevel(level)


def actor_creation_task_id(handle: Any) -> str:
    """The id of the task that creates the actor behind ``handle`` (its ``__init__``'s task).

    Derived from the actor id as Ray derives it (``TaskID.for_actor_creation_task``); the
    creation task's ``call.start`` carries this id, so a submission record names it.
    """
    return ray._raylet.TaskID.for_actor_creation_task(handle._actor_id).hex()  # type: ignore[no-any-return]


def generator_task_id(generator: Any) -> str | None:
    """The task id behind an ``ObjectRefGenerator`` (a streaming generator's ``.remote()``).

    Its public methods yield the items' refs; the task's own ref is ``_generator_ref``.
    """
    ref = getattr(generator, "_generator_ref", None)
    return None if ref is None else ref.task_id().hex()


# Ray's ray.get and ray.wait, as the frames of a thread blocked in them show: the functions
# in ray/_private/worker.py, and the name of the argument that holds the refs (ray.wait's is
# ``ray_waitables`` in Ray 2.60, ``object_refs`` before).
_BLOCKING = {
    "get": ("ray.get", ("object_refs",)),
    "wait": ("ray.wait", ("ray_waitables", "object_refs")),
}
_WORKER_FILE = ray._private.worker.__file__


def blocked_in(frame: Any) -> tuple[str, Any] | None:
    """``("ray.get"|"ray.wait", refs)`` if ``frame`` is Ray's get or wait, else ``None``.

    No public API says what a thread waits on; the frame of Ray's own function does, by
    its arguments. Read when asked (a stuck() snapshot, the watch), never on a call's path.
    """
    code = frame.f_code
    known = _BLOCKING.get(code.co_name)
    if known is None or code.co_filename != _WORKER_FILE:
        return None
    kind, names = known
    local = frame.f_locals
    for name in names:
        if name in local:
            return kind, local[name]
    return None


def ref_of_future(future: Any) -> Any:
    """The ``ObjectRef`` an asyncio future stands for (``await ref``), or ``None``.

    ``await ref`` awaits ``asyncio.wrap_future(ref.future())``: the asyncio future's done
    callback holds the concurrent future (``asyncio.futures._chain_future``), which Ray
    gives the ref as ``object_ref`` to keep it alive.
    """
    for callback in getattr(future, "_callbacks", None) or ():
        function = callback[0] if isinstance(callback, tuple) else callback
        for cell in getattr(function, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            ref = getattr(value, "object_ref", None)
            if isinstance(ref, ray.ObjectRef):
                return ref
    return None


def available_per_node() -> dict[str, dict[str, float]]:
    """Each alive node's available resources now: ``{node id: {resource: amount}}``.

    ``ray.available_resources()`` sums the cluster; the per-node figures come from the
    GCS's resource view (``ray._private.state.available_resources_per_node``, a developer
    API without a public name).
    """
    found = ray._private.state.available_resources_per_node()
    return {node: dict(resources) for node, resources in found.items()}


def actor_location(actor_id: str) -> tuple[str, str | None, int]:
    """``(state, node_id, pid)`` of an actor, from the GCS actor table.

    ``ray.util.state.get_actor`` gives the same but needs the dashboard, which the kit
    does not install. ``state`` is ``"MISSING"`` for an unknown actor.
    """
    from ray._private import state  # noqa: PLC0415 -- asked rarely (stacks, pinned_worker)

    info = state.actors(actor_id)
    if not info:
        return "MISSING", None, 0
    node = info.get("Address", {}).get("NodeID") or None
    return str(info.get("State")), node, int(info.get("Pid") or 0)


def python_function_of(remote_function: Any) -> Callable[..., Any]:
    """The Python function a ``RemoteFunction`` was made from (``_function``)."""
    return remote_function._function  # type: ignore[no-any-return]


def actor_subclass(cls: type) -> type:
    """A fresh subclass of ``cls``, the one ``ray.remote(cls)`` would run (``_modify_class``).

    Ray runs an actor as an instance of its own subclass of the user's class (adding
    ``__ray_ready__``, ``__ray_call__``, ``__ray_terminate__``); ``ray.remote`` takes a class
    that already is one as it is. The kit instruments that subclass, so an actor's class,
    its MRO and the ``__init_subclass__`` hooks run are exactly plain Ray's. A class that is
    one already (``__ray_actor_class__``) gets a plain subclass: never the user's own.
    """
    made: type = ray.actor._modify_class(cls)
    if made is cls:
        made = types.new_class(cls.__name__, (cls,))
        made.__module__ = cls.__module__
    return made


@_registry.cleared_on_reset
@functools.cache
def machine_resources() -> dict[str, float]:
    """``ray.cluster_resources()`` of a one-node cluster of this machine, started now.

    Ray's own reckoning, as ``ray.init()`` makes it: CPUs, GPUs, memory, object store
    memory, and the node's ``node:<ip>`` and head resources.
    """
    try:  # Ray 2.49 and later; 2.40 to 2.48 call it ResourceSpec (the same reckoning)
        from ray._private.resource_and_label_spec import ResourceAndLabelSpec as Spec  # noqa: PLC0415
    except ImportError:
        from ray._private.resource_spec import ResourceSpec as Spec  # noqa: PLC0415

    spec = Spec().resolve(is_head=True, node_ip_address=ray.util.get_node_ip_address())
    return {name: float(amount) for name, amount in spec.to_resource_dict().items()}


def python_class_of(actor_class: Any) -> type:
    """The user's class an ``ActorClass`` was made from (through its metadata)."""
    return actor_class.__ray_metadata__.modified_class.__ray_actor_class__  # type: ignore[no-any-return]


def default_options_of(remote: Any) -> dict[str, Any]:
    """The options a ``RemoteFunction`` or ``ActorClass`` was declared with (a copy)."""
    return dict(remote._default_options)


def replace_actor_executors(make: Callable[..., Any]) -> types.CodeType | None:
    """Have Ray build each actor method's executor as ``make(name, method, bound, static)``.

    Replaces ``ray._private.function_manager.FunctionActorManager._make_actor_method_executor``
    (``bound``/``static``: that module's ``is_class_method``/``is_static_method``): the
    executor runs in the method's thread, a thread of Ray's C++ core for a threaded actor,
    where no public hook runs code; Ray 2.40 also passes ``actor_imported`` (unused by its
    executor, gone by 2.44). Returns the code of Ray's own executor (None: not found).
    """
    import ray._private.function_manager as fm  # noqa: PLC0415 -- in a worker, on first use

    owner = fm.FunctionActorManager
    consts = owner._make_actor_method_executor.__code__.co_consts
    rays = [c for c in consts if getattr(c, "co_name", "") == "actor_method_executor"]

    def make_executor(self: Any, name: str, method: Callable[..., Any], **_: Any) -> Any:
        return make(name, method, fm.is_class_method, fm.is_static_method)

    patch("coverage.actor_methods", owner, "_make_actor_method_executor", make_executor)
    return rays[0] if rays else None

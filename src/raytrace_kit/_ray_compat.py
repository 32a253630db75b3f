"""Every use of Ray's private API, in one place: a Ray upgrade is this one file to check.

Each function says which private member it reads and why no public one does the job.
Everything else in the package uses Ray's public API only. What differs between the Ray
versions the kit supports (2.40 to 2.60, ``pyproject.toml``) is handled here too, each
difference with a comment naming the versions (docs/compatibility.md lists them).
"""

from __future__ import annotations

import functools
import traceback
import types
from collections.abc import Callable
from typing import Any, TypeVar

import ray
import ray._private.utils
import ray._private.worker
import ray.cloudpickle
import ray.exceptions
import ray.runtime_context
import ray.util
from ray.actor import ActorClass
from ray.remote_function import RemoteFunction

from raytrace_kit import _registry

__all__ = [
    "RAY_OWN",
    "TAKEN",
    "ActorAlreadyExistsError",
    "ActorClass",
    "CloudPickler",
    "DynamicObjectRefGenerator",
    "RemoteFunction",
    "accepts_keyword",
    "actor_id_of",
    "actor_location",
    "actor_method_class",
    "actor_method_submit",
    "actor_subclass",
    "attribute_owner",
    "check_function_size",
    "connection_key",
    "current_actor_id",
    "current_task",
    "default_options_of",
    "error_as_delivered",
    "is_kit_patch",
    "is_kit_remote",
    "is_taken",
    "is_worker_process",
    "machine_resources",
    "mark_kit_remote",
    "patch",
    "patched",
    "python_class_of",
    "python_function_of",
    "ray_remote",
    "ray_worker",
    "remote_name",
    "session_location",
]

# Ray's pickler, subclassed by local mode to keep in-process objects as themselves.
CloudPickler: Any = ray.cloudpickle.CloudPickler


# What ray.get of a num_returns="dynamic" call's ref gives: its refs, iterable, with len().
# Public under ``ray`` in every supported version; its module moved (``ray._raylet`` in
# Ray 2.40-2.44, ``ray._private.object_ref_generator`` from 2.45), so it is read from here.
DynamicObjectRefGenerator: Any = ray.DynamicObjectRefGenerator


# What a named actor whose name is taken raises at ``.remote()``: Ray 2.53 and later raise
# ``ActorAlreadyExistsError`` (a ``ValueError``); Ray 2.40-2.52 a plain ``ValueError``, with
# the same message.
ActorAlreadyExistsError: type[Exception] = getattr(
    ray.exceptions, "ActorAlreadyExistsError", ValueError
)


def error_as_delivered(serialized: bytes) -> Exception | None:
    """What ``ray.get`` raises in place of a task's error Ray cannot unpickle, else ``None``.

    ``serialized`` is the error's ``RayError.to_bytes()``, as the worker sends it. An
    exception that pickles but cannot be unpickled (an ``__init__`` whose arguments are not
    its ``args``) arrives, from Ray 2.51, as ``UnserializableException`` with its text; Ray
    2.40-2.50's deserializer catches the failure and delivers a ``RaySystemError`` instead.
    """
    delivered: Exception
    try:
        delivered = ray.exceptions.RayError.from_bytes(serialized)
    except Exception as failure:  # Ray 2.40-2.50: "Failed to unpickle serialized exception"
        delivered = ray.exceptions.RaySystemError(failure, traceback.format_exc())
        return delivered
    unserializable = getattr(ray.exceptions, "UnserializableException", None)  # Ray 2.51+
    if unserializable is not None and isinstance(delivered, unserializable):
        return delivered  # type: ignore[no-any-return]
    return None


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
    signature = getattr(method, "_signature", None)
    if signature is None:
        # Ray 2.40: an ActorMethod has no ``_signature`` (added in 2.41); its handle keeps
        # every method's signature in ``_ray_method_signatures``.
        handle = method._actor_hard_ref or method._actor_ref()
        signatures = getattr(handle, "_ray_method_signatures", None) or {}
        signature = signatures.get(method._method_name)
    return any(parameter.name == name for parameter in signature or ())


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
    function's. Ray 2.40 has no getter for the name (``current_task_name`` came in 2.41):
    its workers keep it only in the process title, which concurrent actor calls overwrite,
    so the name is ``None`` there rather than one that may be another call's.
    """
    worker = _global_worker()
    task = worker.current_task_id
    return (
        None if task.is_nil() else task.hex(),
        int(worker.core_worker.get_current_task_attempt_number()),
        getattr(worker, "current_task_name", None) or None,
    )


def session_location() -> tuple[str, str]:
    """``(temp dir, session name)`` of the Ray cluster this process is connected to.

    Public from Ray 2.54 (``RuntimeContext.get_temp_dir``/``get_session_name``); Ray
    2.40-2.53 keep both on the worker's node object only. Ray must be initialized.
    """
    if _PUBLIC_SESSION_GETTERS:
        context = ray.get_runtime_context()
        return context.get_temp_dir(), context.get_session_name()
    node = _global_worker().node
    return str(node.get_temp_dir_path()), str(node.session_name)


_PUBLIC_SESSION_GETTERS = hasattr(ray.runtime_context.RuntimeContext, "get_session_name")


def current_actor_id() -> str | None:
    """The id of the actor this process hosts, in hex (``None`` if none), as above."""
    actor = _global_worker().actor_id
    return None if actor.is_nil() else actor.hex()


def current_attempt() -> int:
    """The attempt number of the running task (0 first, 1 for the first retry...).

    No public getter exists.
    """
    return int(_global_worker().core_worker.get_current_task_attempt_number())


def actor_id_of(handle: Any) -> str:
    """The id of the actor behind an ``ActorHandle``, in hex (``_actor_id``).

    Public getters exist only inside the actor (``get_runtime_context().get_actor_id()``).
    """
    return handle._actor_id.hex()  # type: ignore[no-any-return]


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
    try:  # Ray 2.49 and later
        from ray._private.resource_and_label_spec import (  # noqa: PLC0415
            ResourceAndLabelSpec as Spec,
        )
    except ImportError:  # Ray 2.40-2.48: the same reckoning, without labels
        from ray._private.resource_spec import ResourceSpec as Spec  # noqa: PLC0415

    spec = Spec().resolve(is_head=True, node_ip_address=ray.util.get_node_ip_address())
    return {name: float(amount) for name, amount in spec.to_resource_dict().items()}


def python_class_of(actor_class: Any) -> type:
    """The user's class an ``ActorClass`` was made from (through its metadata)."""
    return actor_class.__ray_metadata__.modified_class.__ray_actor_class__  # type: ignore[no-any-return]


def default_options_of(remote: Any) -> dict[str, Any]:
    """The options a ``RemoteFunction`` or ``ActorClass`` was declared with (a copy)."""
    return dict(remote._default_options)


# Set on the RemoteFunction/ActorClass objects raytrace_kit itself submits through, so
# that local mode tells the kit's own submissions from the user's plain @ray.remote calls.
_R = TypeVar("_R")
_KIT_MARK = "__raytrace_kit__"


def mark_kit_remote(remote: _R) -> _R:
    """Mark a Ray remote function or actor class as the kit's own (not a plain call)."""
    setattr(remote, _KIT_MARK, True)
    return remote


def is_kit_remote(remote: Any) -> bool:
    """Whether ``remote`` (or the object it was made from by ``.options()``) is the kit's."""
    return bool(getattr(remote, _KIT_MARK, False))


# Whether a plain remote function or actor class is sent through a proxy by instrument()
# when it is submitted: set by instrument(), read by local mode (which then neither warns
# about it as a plain call nor converts its arguments).
TAKEN: list[Callable[[Any], bool]] = []


def is_taken(remote: Any) -> bool:
    """Whether instrument() takes the calls of ``remote`` (a plain Ray object)."""
    return bool(TAKEN) and TAKEN[0](remote)


# Ray's own functions, as they were before any hook of the kit's replaced them: by name
# under ``ray`` (``get``, ``actor.exit_actor`` ...). Local mode calls these for what is not
# local; the hooks fill in the rest as they are installed.
RAY_OWN: dict[str, Callable[..., Any]] = {
    "get": ray.get,
    "wait": ray.wait,
    "put": ray.put,
    "kill": ray.kill,
    "get_actor": ray.get_actor,
    "cancel": ray.cancel,
    "get_runtime_context": ray.get_runtime_context,
    "get_gpu_ids": ray.get_gpu_ids,
}
# The kit's patches in force: key -> (owner, attribute, Ray's own, ours). The key is the
# dotted name under ``ray``, with a ``#suffix`` where two hooks share one attribute.
_PATCHES: dict[str, tuple[Any, str, Callable[..., Any], Callable[..., Any]]] = {}


def attribute_owner(dotted: str) -> tuple[Any, str]:
    """The object that holds ``ray.<dotted>``, and the attribute's name (``#suffix`` cut)."""
    path, _, attribute = dotted.partition("#")[0].rpartition(".")
    owner: Any = ray
    for part in filter(None, path.split(".")):
        owner = getattr(owner, part)
    return owner, attribute


def patched(key: str) -> bool:
    """Whether the kit's patch named ``key`` is in force."""
    return key in _PATCHES


def is_kit_patch(value: object) -> bool:
    """Whether ``value`` is one of the kit's patches in force (another may stack on it)."""
    return any(entry[3] is value for entry in _PATCHES.values())


def patch(key: str, owner: Any, attribute: str, ours: Callable[..., Any]) -> None:
    """Put ``ours`` in place of ``owner.attribute``; :func:`unpatch_all` puts Ray's back."""
    _PATCHES[key] = (owner, attribute, getattr(owner, attribute), ours)
    setattr(owner, attribute, ours)


def _unpatch_all() -> None:
    """Put back Ray's own where the kit's patches are still in place (for tests)."""
    TAKEN.clear()
    # Newest first: two patches of one attribute unwind to Ray's own.
    for owner, attribute, original, ours in reversed(_PATCHES.values()):
        if getattr(owner, attribute, None) is ours:
            setattr(owner, attribute, original)
    _PATCHES.clear()


# Patches outlive a fork (what the program configured stays configured).
_registry.register(_unpatch_all, layer=_registry.PROCESS)

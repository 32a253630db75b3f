"""Results of local calls: ``LocalRef``, copies through Ray's serializer, and ``ray.*`` hooks.

With Ray initialized, local results are real ``ObjectRef`` objects (``ray.put``), so they mix
with everything Ray offers. Without Ray, they are :class:`LocalRef` objects, and
``ray.get``, ``ray.wait``, ``ray.put``, ``ray.kill`` and ``ray.get_actor`` are wrapped so that
user code does not change. The wrappers hand everything that is not local to Ray untouched.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray
import ray.cloudpickle
from ray.exceptions import RayError, RayTaskError

__all__ = [
    "LocalRef",
    "LocalRefGenerator",
    "copy_value",
    "error_ref",
    "install_ray_hooks",
    "resolve_argument",
    "task_error",
    "value_ref",
]


class LocalRef:
    """The result of a call run in local mode while Ray is not initialized.

    Use it as an ``ObjectRef``: ``ray.get(ref)``, ``ray.wait([ref])``, or pass it to another
    debuggable call. Each ``ray.get`` returns a fresh copy when the call copied its result
    (the default), as Ray deserializes a fresh copy from its object store.
    """

    __slots__ = ("_error", "_id", "_payload", "_value")

    def __init__(
        self,
        *,
        value: Any = None,
        payload: bytes | None = None,
        error: RayError | None = None,
    ) -> None:
        self._value = value
        self._payload = payload
        self._error = error
        self._id = os.urandom(14).hex()

    def hex(self) -> str:
        """A unique id in hex, like ``ObjectRef.hex()``."""
        return self._id

    def _get(self) -> Any:
        error = self._error
        if isinstance(error, RayTaskError):
            cause = error.cause
            dual = error.as_instanceof_cause()
            # The user's own frames, as real frames: pdb.pm() and IDEs can walk them.
            raise dual.with_traceback(cause.__traceback__) from None
        if error is not None:
            raise error  # a Ray system error (ActorDiedError...), raised as Ray raises it
        if self._payload is not None:
            return _loads(self._payload)
        return self._value

    def __repr__(self) -> str:
        return f"LocalRef({self._id})"


class LocalRefGenerator:
    """What a generator function called in local mode returns: its refs, in order.

    Like Ray's ``ObjectRefGenerator``, iterate it and ``ray.get`` each ref. The generator
    already ran to completion; if it raised, the last ref raises at ``ray.get``.
    """

    def __init__(self, refs: Sequence[Any]) -> None:
        self._refs = list(refs)
        self._next = 0

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._next >= len(self._refs):
            raise StopIteration
        ref = self._refs[self._next]
        self._next += 1
        return ref

    def __len__(self) -> int:
        return len(self._refs)

    def __repr__(self) -> str:
        return f"LocalRefGenerator({len(self._refs)} refs)"


# --- copying through Ray's serializer -------------------------------------------------

# Objects that stand for in-process things (local actor handles) and must survive a copy
# as themselves, the way Ray ships an actor handle rather than the actor.
_by_identity: tuple[type, ...] = ()


def register_identity_type(cls: type) -> None:
    """Keep instances of ``cls`` as themselves when values are copied."""
    global _by_identity  # noqa: PLW0603 -- a registry filled at import time
    _by_identity = (*_by_identity, cls)


class _Pickler(ray.cloudpickle.CloudPickler):  # type: ignore[misc]  # untyped base
    def __init__(self, file: io.BytesIO, table: dict[int, Any]) -> None:
        super().__init__(file, protocol=5)
        self._table = table

    def persistent_id(self, obj: Any) -> int | None:
        if _by_identity and isinstance(obj, _by_identity):
            self._table[id(obj)] = obj
            return id(obj)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, table: dict[int, Any]) -> None:
        super().__init__(file)
        self._table = table

    def persistent_load(self, pid: Any) -> Any:
        return self._table[pid]


class _Payload(bytes):
    """Serialized bytes plus the in-process objects they refer to."""

    table: dict[int, Any]


def _dumps(value: Any) -> _Payload:
    buffer = io.BytesIO()
    table: dict[int, Any] = {}
    _Pickler(buffer, table).dump(value)
    payload = _Payload(buffer.getvalue())
    payload.table = table
    return payload


def _loads(payload: bytes) -> Any:
    table = getattr(payload, "table", {})
    return _Unpickler(io.BytesIO(payload), table).load()


def copy_value(value: Any) -> Any:
    """Copy ``value`` through cloudpickle, as Ray's serializer would.

    Raises:
        Exception: Whatever pickling raises for a value Ray could not serialize either.
    """
    return _loads(_dumps(value))


# --- building refs ----------------------------------------------------------------------


def task_error(exc: BaseException, function: str) -> RayTaskError:
    """The ``RayTaskError`` Ray would deliver for ``exc`` raised in ``function``."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return RayTaskError(
        function, text, exc, proctitle=f"raytrace_kit local::{function}", pid=os.getpid()
    )


def value_ref(value: Any, copy: bool, function: str) -> Any:
    """A ref holding ``value``: a real ``ObjectRef`` with Ray running, else a LocalRef.

    A value that cannot be serialized gives an error ref, as a task whose return value
    cannot be serialized fails in Ray.
    """
    if ray.is_initialized():
        try:
            return _original["put"](value)
        except Exception as exc:
            return error_ref(exc, function)
    if not copy:
        return LocalRef(value=value)
    try:
        return LocalRef(payload=_dumps(value))
    except Exception as exc:
        return error_ref(exc, function)


def error_ref(exc: BaseException, function: str) -> Any:
    """A ref whose ``ray.get`` raises what Ray raises for ``exc`` in ``function``.

    A user exception becomes a ``RayTaskError``; a Ray system error (``ActorDiedError``
    for a killed local actor) is raised as it is, as Ray raises it.
    """
    if isinstance(exc, RayError) and not isinstance(exc, RayTaskError):
        return LocalRef(error=exc)
    error = exc if isinstance(exc, RayTaskError) else task_error(exc, function)
    if ray.is_initialized():
        # Ray stores a RayTaskError as a task error: ray.get raises it, here and in
        # every task that receives the ref.
        return _original["put"](error)
    return LocalRef(error=error)


def resolve_argument(arg: Any) -> Any:
    """The value of a top-level argument: refs (local or real) are resolved, as in Ray.

    Raises:
        RayTaskError: The ref holds a failed call's error (the dependent call fails too).
    """
    if isinstance(arg, LocalRef):
        return arg._get()
    if isinstance(arg, ray.ObjectRef):
        return _original["get"](arg)
    return arg


# --- ray.* hooks ------------------------------------------------------------------------

_original: dict[str, Callable[..., Any]] = {
    "get": ray.get,
    "wait": ray.wait,
    "put": ray.put,
    "kill": ray.kill,
    "get_actor": ray.get_actor,
}
_hooks_lock = threading.Lock()
_hooks_installed = False

# Set by the local-mode module: (is local mode on here?, kill, get_actor) for actors.
local_put_enabled: Callable[[], bool] = lambda: False  # noqa: E731 -- replaced at import
local_kill: Callable[[Any], bool] = lambda handle: False  # noqa: E731
local_get_actor: Callable[[str, str | None], Any] = lambda name, namespace: None  # noqa: E731


def _get(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(object_refs, LocalRef):
        return object_refs._get()
    if isinstance(object_refs, list | tuple) and any(
        isinstance(ref, LocalRef) for ref in object_refs
    ):
        real = [ref for ref in object_refs if not isinstance(ref, LocalRef)]
        fetched = iter(_original["get"](real, *args, **kwargs) if real else [])
        return [ref._get() if isinstance(ref, LocalRef) else next(fetched) for ref in object_refs]
    return _original["get"](object_refs, *args, **kwargs)


def _wait(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
    if not isinstance(object_refs, list | tuple) or not any(
        isinstance(ref, LocalRef) for ref in object_refs
    ):
        return _original["wait"](object_refs, *args, **kwargs)
    num_returns = kwargs.get("num_returns", args[0] if args else 1)
    if num_returns > len(object_refs):
        msg = "num_returns cannot be greater than the number of objects provided to ray.wait."
        raise ValueError(msg)
    # Local calls finished when they were submitted: local refs are always ready.
    ready = [ref for ref in object_refs if isinstance(ref, LocalRef)][:num_returns]
    real = [ref for ref in object_refs if not isinstance(ref, LocalRef)]
    if len(ready) < num_returns and real:
        more, _ = _original["wait"](
            real,
            num_returns=num_returns - len(ready),
            timeout=kwargs.get("timeout"),
            fetch_local=kwargs.get("fetch_local", True),
        )
        ready += more
    chosen = {id(ref) for ref in ready}
    return (
        [ref for ref in object_refs if id(ref) in chosen],
        [ref for ref in object_refs if id(ref) not in chosen],
    )


def _put(value: Any, *args: Any, **kwargs: Any) -> Any:
    if not ray.is_initialized() and local_put_enabled():
        return value_ref(value, copy=True, function="ray.put")
    return _original["put"](value, *args, **kwargs)


def _kill(actor: Any, *args: Any, **kwargs: Any) -> Any:
    if local_kill(actor):
        return None
    return _original["kill"](actor, *args, **kwargs)


def _get_actor(name: str, namespace: str | None = None, *args: Any, **kwargs: Any) -> Any:
    handle = local_get_actor(name, namespace)
    if handle is not None:
        return handle
    if not ray.is_initialized():
        msg = (
            f"Failed to look up actor with name {name!r}: no local actor has that name, "
            "and Ray is not initialized."
        )
        raise ValueError(msg)
    return _original["get_actor"](name, namespace, *args, **kwargs)


_hooks = {"get": _get, "wait": _wait, "put": _put, "kill": _kill, "get_actor": _get_actor}


def install_ray_hooks() -> None:
    """Wrap ``ray.get/wait/put/kill/get_actor`` so they understand local objects (once).

    The wrappers keep the name, docs and signature of Ray's functions and pass anything
    that is not local straight to them.
    """
    global _hooks_installed  # noqa: PLW0603 -- installed once per process
    with _hooks_lock:
        if _hooks_installed:
            return
        for name, hook in _hooks.items():
            original = _original[name]
            if getattr(ray, name) is not original:
                continue  # someone else wrapped it: leave theirs alone
            setattr(ray, name, functools.wraps(original)(hook))
        _hooks_installed = True


def uninstall_ray_hooks() -> None:
    """Put Ray's own functions back (for tests)."""
    global _hooks_installed  # noqa: PLW0603 -- see install_ray_hooks
    with _hooks_lock:
        for name, original in _original.items():
            if getattr(getattr(ray, name), "__wrapped__", None) is original:
                setattr(ray, name, original)
        _hooks_installed = False

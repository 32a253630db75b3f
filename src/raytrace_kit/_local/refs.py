"""Results of local calls: ``LocalRef``, copies through Ray's serializer, and error refs.

With Ray initialized, local results are real ``ObjectRef`` objects (``ray.put``), so they mix
with everything Ray offers. Without Ray, they are :class:`LocalRef` objects, which the
``ray.*`` hooks (:mod:`.hooks`) understand.
"""

from __future__ import annotations

import io
import os
import pickle
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError

from raytrace_kit import _ray_compat

__all__ = [
    "RAY",
    "InProcess",
    "LocalRef",
    "LocalRefGenerator",
    "copy_value",
    "error_ref",
    "resolve_argument",
    "task_error",
    "value_ref",
]

# Ray's own functions, as they were before local mode hooked any of them.
RAY: dict[str, Callable[..., Any]] = {
    "get": ray.get,
    "wait": ray.wait,
    "put": ray.put,
    "kill": ray.kill,
    "get_actor": ray.get_actor,
}


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


class InProcess:
    """Base of objects that stand for in-process things (local actor handles).

    They survive a copy as themselves, the way Ray ships an actor handle rather than the
    actor.
    """

    __slots__ = ()


class _Pickler(_ray_compat.CloudPickler):  # type: ignore[misc]  # untyped base
    def __init__(self, file: io.BytesIO, table: dict[int, Any]) -> None:
        super().__init__(file, protocol=5)
        self._table = table

    def persistent_id(self, obj: Any) -> int | None:
        if isinstance(obj, InProcess):
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
            return RAY["put"](value)
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
        return RAY["put"](error)
    return LocalRef(error=error)


def resolve_argument(arg: Any) -> Any:
    """The value of a top-level argument: refs (local or real) are resolved, as in Ray.

    Raises:
        RayTaskError: The ref holds a failed call's error (the dependent call fails too).
    """
    if isinstance(arg, LocalRef):
        return arg._get()
    if isinstance(arg, ray.ObjectRef):
        return RAY["get"](arg)
    return arg

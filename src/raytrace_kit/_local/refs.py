"""Results of local calls: ``LocalRef`` (a real ``ray.ObjectRef``), copies, and error refs.

A local call's result is a :class:`LocalRef`, with or without ``ray.init()``: a subclass of
``ray.ObjectRef`` that holds its value in this process, so ``isinstance`` checks, ``await``,
``.future()`` and the ``ray.*`` hooks (:mod:`.hooks`) all work and no object store is
needed. A ref can be *pending* (an async actor call still running on the actor's loop):
``ray.get`` and ``await`` then wait for it.

Copies go through cloudpickle with protocol 5 and out-of-band buffers, as Ray's serializer:
arrays come back read-only and 64-byte aligned, as zero-copy reads from Ray's object store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import traceback
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError

from raytrace_kit._local import state as local_state
from raytrace_kit._local.copies import (
    NOT_FLAT,
    Flat,
    Frozen,
    InProcess,
    copy_flat,
    copy_value,
)
from raytrace_kit._output.frames import user_frames
from raytrace_kit._ray_compat import RAY_OWN
from raytrace_kit._ray_versions import error_as_delivered
from raytrace_kit.exceptions import LocalModeError

__all__ = [
    "InProcess",
    "LocalRef",
    "LocalRefGenerator",
    "copy_value",
    "error_ref",
    "frozen_ref",
    "pending_ref",
    "resolve_argument",
    "task_error",
    "to_ray",
    "value_ref",
]


def _new_id() -> bytes:
    ids = local_state.state  # a prefix per process, drawn again after a fork
    return ids.id_prefix + next(ids.id_counter).to_bytes(8, "little")


class LocalRef(ray.ObjectRef, InProcess):  # type: ignore[misc]  # Cython base
    """The result of a call run in local mode: a ``ray.ObjectRef`` held in this process.

    Use it as any ``ObjectRef``: ``ray.get(ref)``, ``ray.wait([ref])``, ``await ref``,
    ``ref.future()``, or pass it to another debuggable call. Each ``ray.get`` returns a
    fresh copy when the call copied its result (the default), as Ray deserializes a fresh
    copy from its object store. Pickled (``pickle.dumps``, ``ray.put([ref])``), it comes
    back as itself in this process; it cannot leave it: a Ray worker could not resolve it.
    """

    __slots__ = ("_error", "_future", "_payload", "_value")

    def __init__(
        self,
        *,
        value: Any = None,
        payload: Frozen | Flat | None = None,
        error: BaseException | None = None,
        future: concurrent.futures.Future[LocalRef] | None = None,
    ) -> None:
        self._set_id(_new_id())
        self._value = value
        self._payload = payload
        self._error = error
        self._future = future

    def local_settle(self, timeout: float | None = None) -> None:
        """Wait for a pending ref's call to finish and take its outcome (``ray.get``'s timeout)."""
        future = self._future
        if future is None:
            return
        try:
            done = future.result(timeout)
        except concurrent.futures.TimeoutError:
            msg = "Get timed out: some object(s) not ready."
            raise GetTimeoutError(msg) from None
        except concurrent.futures.CancelledError:
            from ray.exceptions import TaskCancelledError  # noqa: PLC0415

            done = LocalRef(error=TaskCancelledError())
        self._value, self._payload, self._error = done._value, done._payload, done._error
        self._future = None

    @property
    def local_pending(self) -> concurrent.futures.Future[LocalRef] | None:
        """The future of the call that will fill this ref; ``None`` once it has its outcome."""
        return self._future

    def local_ready(self) -> bool:
        """Whether the call has its outcome (``ray.wait``'s test)."""
        future = self._future
        return future is None or future.done()

    def local_get(self, timeout: float | None = None) -> Any:
        """The value, as ``ray.get`` returns it, or the call's error raised as Ray raises it."""
        if self._future is not None:
            self.local_settle(timeout)
        error = self._error
        if error is not None:
            if isinstance(error, RayTaskError):
                cause = error.cause
                dual = error.as_instanceof_cause()
                # The user's own frames, as real frames: pdb.pm() and IDEs can walk them.
                raise dual.with_traceback(
                    user_frames(getattr(cause, "__traceback__", None), all_kit=True)
                )
            raise error  # a Ray system error (ActorDiedError...), raised as Ray raises it
        if self._payload is not None:
            return self._payload.load()
        return self._value

    def future(self) -> concurrent.futures.Future[Any]:
        """A ``concurrent.futures.Future`` of the value, as ``ObjectRef.future()``."""
        result: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def fill(_: object = None) -> None:
            try:
                result.set_result(self.local_get())
            except BaseException as exc:
                result.set_exception(exc)

        pending = self._future
        if pending is None:
            fill()
        else:
            pending.add_done_callback(fill)
        return result

    def as_future(self, _internal: bool = False) -> asyncio.Future[Any]:
        """An ``asyncio.Future`` of the value, as ``ObjectRef.as_future()``."""
        return asyncio.wrap_future(self.future())

    def __await__(self) -> Generator[Any, None, Any]:
        pending = self._future
        if pending is not None and not pending.done():
            yield from asyncio.wrap_future(pending).__await__()
        return self.local_get()

    def __reduce__(self) -> Any:
        # Pickled as Ray pickles a ref out of band (pickle.dumps(ref), ray.put([ref])): by
        # id, the ref kept alive for the life of the process, as Ray pins such an object.
        key = self.binary()
        local_state.state.pickled_refs[key] = self
        return (_unpickled_ref, (key, os.getpid()))

    def __repr__(self) -> str:
        return f"ObjectRef({self.hex()})"  # as Ray's: messages and logs read the same


def _unpickled_ref(key: bytes, pid: int) -> LocalRef:
    """A local ref pickled in this process: itself.

    Raises:
        LocalModeError: In another process (a Ray worker, say), where it cannot exist.
    """
    ref: LocalRef | None = local_state.state.pickled_refs.get(key)
    if ref is None:
        msg = (
            f"ObjectRef({key.hex()}) is the result of a call that ran in local mode in "
            f"process {pid}: it lives there and cannot be resolved in process {os.getpid()}. "
            "Pass its value (ray.get(ref)), or make the receiving call debuggable so that "
            "it runs locally too."
        )
        raise LocalModeError(msg)
    return ref


def pending_ref(future: concurrent.futures.Future[LocalRef]) -> LocalRef:
    """A ref that resolves to the finished ref ``future`` gives."""
    return LocalRef(future=future)


class LocalRefGenerator(ray.ObjectRefGenerator):  # type: ignore[misc]  # untyped base
    """What a generator called in local mode returns: a ``ray.ObjectRefGenerator``.

    Iterate it (``for ref in gen`` or ``async for``) and ``ray.get`` each ref. The
    generator runs as you iterate: each ``next()`` runs it to its next ``yield``, in this
    thread (async generators: on their actor's loop). If it raises, the next ref raises at
    ``ray.get`` and iteration ends, as in Ray.
    """

    def __init__(self, step: Callable[[], LocalRef] | Sequence[LocalRef]) -> None:
        # ``step`` produces the next ref or raises StopIteration; a list is already made.
        self._buffer: deque[LocalRef] = deque()
        self._step: Callable[[], LocalRef] | None
        if callable(step):
            self._step = step
        else:
            self._buffer.extend(step)
            self._step = None
        self._on_drained: list[Callable[[], None]] = []

    def _produce(self) -> LocalRef | None:
        step = self._step
        if step is None:
            return None
        try:
            return step()
        except StopIteration:
            self._finish()
            return None

    def _finish(self) -> None:
        self._step = None
        callbacks, self._on_drained = self._on_drained, []
        for callback in callbacks:
            callback()

    def _drain(self) -> None:
        """Run the generator to its end now, keeping its refs for the iteration."""
        while self._step is not None:
            ref = self._produce()
            if ref is not None:
                self._buffer.append(ref)

    def __iter__(self) -> Iterator[LocalRef]:
        return self

    def __next__(self) -> LocalRef:
        if self._buffer:
            return self._buffer.popleft()
        ref = self._produce()
        if ref is None:
            raise StopIteration
        return ref

    def __aiter__(self) -> LocalRefGenerator:
        return self

    async def __anext__(self) -> LocalRef:
        if self._buffer:
            return self._buffer.popleft()
        step = self._step
        if step is None:
            raise StopAsyncIteration
        asynchronous = getattr(step, "asynchronous", None)
        ref: LocalRef | None
        if asynchronous is not None:  # on another loop: await it, never block this one
            ref = await asynchronous()
        else:
            ref = self._produce()
        if ref is None:
            self._finish()
            raise StopAsyncIteration
        return ref

    def completed(self) -> LocalRef:
        """A ref ready when the generator has finished (it runs to its end now)."""
        self._drain()
        if self._buffer and self._buffer[-1]._error is not None:
            return self._buffer[-1]
        return LocalRef(value=None)

    def is_finished(self) -> bool:
        """Whether every ref was produced and taken."""
        return self._step is None and not self._buffer

    def next_ready(self) -> bool:
        """Whether ``next()`` returns a ref at once (always: it runs the generator)."""
        return not self.is_finished()

    def close(self) -> None:
        self._step = None
        self._buffer.clear()

    def __del__(self) -> None:
        pass  # Ray's releases its refs in the object store; nothing to release here

    def __repr__(self) -> str:
        state = "finished" if self._step is None else "running"
        return f"LocalRefGenerator({state}, {len(self._buffer)} refs buffered)"


def task_error(exc: BaseException, function: str) -> RayTaskError:
    """The ``RayTaskError`` Ray would deliver for ``exc`` raised in ``function``.

    As in Ray, a cause that cannot be pickled is replaced by a ``RayError`` that says so
    (``RayTaskError`` does this itself).
    """
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return RayTaskError(
        function, text, exc, proctitle=f"raytrace_kit local::{function}", pid=os.getpid()
    )


def value_ref(value: Any, copy: bool, function: str) -> LocalRef:
    """A ref holding ``value``; a copy unless ``copy`` is false.

    A value that cannot be serialized gives an error ref, as a task whose return value
    cannot be serialized fails in Ray.
    """
    if not copy:
        return LocalRef(value=value)
    return frozen_ref(value, function)


def frozen_ref(value: Any, function: str | None = None) -> LocalRef:
    """A ref holding a copy of ``value`` (``ray.put``), each ``ray.get`` a fresh one.

    Raises:
        Exception: ``value`` cannot be serialized (an error ref instead, for a call's
            value: ``function`` given).
    """
    copied = copy_flat(value)
    if copied is value:
        return LocalRef(value=value)  # immutable: nothing a copy would protect
    if copied is not NOT_FLAT:
        return LocalRef(payload=Flat(copied))
    try:
        return LocalRef(payload=Frozen(value))
    except Exception as exc:
        if function is None:
            raise
        return error_ref(exc, function)


def error_ref(exc: BaseException, function: str) -> LocalRef:
    """A ref whose ``ray.get`` raises what Ray raises for ``exc`` in ``function``.

    A user exception becomes a ``RayTaskError``; a Ray system error (``ActorDiedError``
    for a killed local actor) is raised as it is, as Ray raises it.
    """
    if isinstance(exc, RayError):  # a system error, or a RayTaskError already made
        return LocalRef(error=exc)
    return LocalRef(error=_as_delivered(task_error(exc, function)))


def _as_delivered(error: RayTaskError) -> RayError:
    """``error``, or what Ray raises in its place where Ray could not deliver it.

    Ray pickles a failed task's error in the worker and unpickles it in the caller
    (``RayError.to_bytes``, ``from_bytes``); an exception that pickles but cannot be
    unpickled (an ``__init__`` whose arguments are not its ``args``) arrives as another
    error (which one depends on Ray's version: ``error_as_delivered``). The same round
    trip, here; otherwise the original stays, real frames and all, for ``pdb.pm()``.
    """
    try:
        serialized = error.to_bytes()
    except Exception:
        return error  # cannot even be pickled: RayTaskError replaced the cause itself
    delivered = error_as_delivered(serialized)
    return error if delivered is None else delivered


def resolve_argument(arg: Any) -> Any:
    """The value of a top-level argument: refs (local or real) are resolved, as in Ray.

    Raises:
        RayTaskError: The ref holds a failed call's error (the dependent call fails too).
    """
    if isinstance(arg, LocalRef):
        return arg.local_get()
    if isinstance(arg, ray.ObjectRef):
        return RAY_OWN["get"](arg)
    return arg


def to_ray(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Arguments for a call that goes to Ray: top-level local refs become real refs.

    A local ref's value (or error) is put in Ray's object store, so the worker receives it
    as Ray delivers any ref's value; without this, Ray would wait for an object that is
    not in its store.
    """
    if not any(type(a) is LocalRef for a in args) and not any(
        type(v) is LocalRef for v in kwargs.values()
    ):
        return args, kwargs
    return tuple(_real(a) for a in args), {k: _real(v) for k, v in kwargs.items()}


def _real(arg: Any) -> Any:
    if type(arg) is not LocalRef:
        return arg
    arg.local_settle()
    if arg._error is not None:
        return RAY_OWN["put"](arg._error)
    return RAY_OWN["put"](arg.local_get())

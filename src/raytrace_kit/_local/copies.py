"""Copies as Ray's serializer makes them: cloudpickle, protocol 5, frozen buffers.

Arrays travel out of band, as in Ray, and come back backed by a read-only, 64-byte-aligned
buffer: what a zero-copy read from Ray's object store gives. Local refs and actor handles
(:class:`InProcess`) stay themselves, as Ray passes refs and handles by reference.
"""

from __future__ import annotations

import contextvars
import ctypes
import io
import pickle
from typing import Any

from raytrace_kit import _ray_compat

__all__ = [
    "ATOMS",
    "NOT_FLAT",
    "Flat",
    "Frozen",
    "InProcess",
    "copy_flat",
    "copy_value",
    "keep_alive",
]

_ALIGNMENT = 64  # Ray's object store aligns buffers to 64 bytes


class InProcess:
    """Base of objects that stand for in-process things (local refs, actor handles).

    They survive a copy as themselves, the way Ray ships a ref or an actor handle rather
    than what it stands for.
    """

    __slots__ = ()


# While a Frozen value is pickled: the in-process objects its bytes refer to by id (actors
# behind handles), which it must keep alive as Ray keeps an actor alive while a serialized
# handle to it exists.
_KEPT: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "raytrace_kit_kept", default=None
)


def keep_alive(obj: Any) -> None:
    """Called by ``__reduce__`` of objects pickled by id: the copy being made holds ``obj``."""
    kept = _KEPT.get()
    if kept is not None:
        kept.append(obj)


class _Pickler(_ray_compat.CloudPickler):  # type: ignore[misc]  # untyped base
    def __init__(self, file: io.BytesIO, table: dict[int, Any], buffers: list[Any]) -> None:
        super().__init__(file, protocol=5, buffer_callback=buffers.append)
        self._table = table

    def persistent_id(self, obj: Any) -> int | None:
        if isinstance(obj, InProcess):
            self._table[id(obj)] = obj
            return id(obj)
        return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, table: dict[int, Any], buffers: list[Any]) -> None:
        super().__init__(file, buffers=buffers)
        self._table = table

    def persistent_load(self, pid: Any) -> Any:
        return self._table[pid]


def _frozen_buffer(buffer: pickle.PickleBuffer) -> memoryview:
    """A read-only, 64-byte-aligned copy of ``buffer``, as a read from Ray's object store."""
    raw = buffer.raw()
    size = raw.nbytes
    block = (ctypes.c_char * (size + _ALIGNMENT))()
    start = -ctypes.addressof(block) % _ALIGNMENT
    view = memoryview(block).cast("B")[start : start + size]
    view[:] = raw
    return view.toreadonly()


# Immutable values: a copy could not be told from the original, so none is made.
ATOMS = frozenset({int, float, complex, str, bytes, bool, type(None)})


NOT_FLAT = object()  # what copy_flat() gives for a value it leaves to the pickler


def copy_flat(value: Any) -> Any:
    """A copy of an atom or a flat container, without pickling; :data:`NOT_FLAT` otherwise.

    An atom or a tuple of atoms is its own copy; a list or dict (those very types) of atoms,
    keys too, is copied by its ``copy()``: the copy Ray's round trip through its serializer
    gives, up to the identity of immutable items, ten times sooner than pickling it.
    """
    kind = type(value)
    if kind in ATOMS:
        return value
    if kind is list:
        return value.copy() if ATOMS.issuperset(map(type, value)) else NOT_FLAT
    if kind is dict:
        if ATOMS.issuperset(map(type, value)) and ATOMS.issuperset(map(type, value.values())):
            return value.copy()
        return NOT_FLAT
    if kind is tuple and ATOMS.issuperset(map(type, value)):
        return value
    return NOT_FLAT


class Flat:
    """A flat container held for a ref: each ``load()`` a fresh copy, as :class:`Frozen`'s."""

    __slots__ = ("value",)

    def __init__(self, value: list[Any] | dict[Any, Any]) -> None:
        self.value = value

    def load(self) -> Any:
        return self.value.copy()


class Frozen:
    """A value as Ray's object store would hold it: pickled bytes and frozen buffers.

    ``load()`` gives a fresh copy of the value each time; its arrays share the frozen,
    read-only buffers, as Ray's zero-copy reads share the object store's memory.

    Plain data takes the C pickler (several times faster); what it cannot take (lambdas,
    local classes, local refs, which stay themselves) takes Ray's cloudpickle.
    """

    __slots__ = ("buffers", "data", "kept", "table")

    def __init__(self, value: Any) -> None:
        raw: list[pickle.PickleBuffer] = []
        self.table: dict[int, Any] | None = None
        self.kept: list[Any] = []
        token = _KEPT.set(self.kept)
        try:
            self.data = pickle.dumps(value, protocol=5, buffer_callback=raw.append)
        except Exception:  # not plain data: Ray's pickler, keeping in-process objects
            raw.clear()
            out = io.BytesIO()
            self.table = {}
            _Pickler(out, self.table, raw).dump(value)
            self.data = out.getvalue()
        finally:
            _KEPT.reset(token)
        self.buffers = [_frozen_buffer(b) for b in raw] if raw else None

    def load(self) -> Any:
        buffers = self.buffers or ()
        if self.table is None:
            return pickle.loads(self.data, buffers=buffers)  # noqa: S301 -- our own bytes
        return _Unpickler(io.BytesIO(self.data), self.table, list(buffers)).load()


def copy_value(value: Any) -> Any:
    """Copy ``value`` as Ray's serializer would (arrays come back read-only).

    Raises:
        Exception: Whatever pickling raises for a value Ray could not serialize either.
    """
    copied = copy_flat(value)
    if copied is not NOT_FLAT:
        return copied
    return Frozen(value).load()

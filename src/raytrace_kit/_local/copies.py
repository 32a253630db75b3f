"""Copies as Ray's serializer makes them: cloudpickle, protocol 5, frozen buffers.

Arrays travel out of band, as in Ray, and come back backed by a read-only, 64-byte-aligned
buffer: what a zero-copy read from Ray's object store gives. Local refs and actor handles
(:class:`InProcess`) stay themselves, as Ray passes refs and handles by reference.
"""

from __future__ import annotations

import ctypes
import io
import pickle
from typing import Any

from raytrace_kit import _ray_compat

__all__ = ["Frozen", "InProcess", "copy_value"]

_ALIGNMENT = 64  # Ray's object store aligns buffers to 64 bytes


class InProcess:
    """Base of objects that stand for in-process things (local refs, actor handles).

    They survive a copy as themselves, the way Ray ships a ref or an actor handle rather
    than what it stands for.
    """

    __slots__ = ()


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


class Frozen:
    """A value as Ray's object store would hold it: pickled bytes and frozen buffers.

    ``load()`` gives a fresh copy of the value each time; its arrays share the frozen,
    read-only buffers, as Ray's zero-copy reads share the object store's memory.
    """

    __slots__ = ("buffers", "data", "table")

    def __init__(self, value: Any) -> None:
        out = io.BytesIO()
        self.table: dict[int, Any] = {}
        buffers: list[pickle.PickleBuffer] = []
        _Pickler(out, self.table, buffers).dump(value)
        self.data = out.getvalue()
        self.buffers = [_frozen_buffer(b) for b in buffers] if buffers else None

    def load(self) -> Any:
        return _Unpickler(io.BytesIO(self.data), self.table, self.buffers or []).load()


def copy_value(value: Any) -> Any:
    """Copy ``value`` as Ray's serializer would (arrays come back read-only).

    Raises:
        Exception: Whatever pickling raises for a value Ray could not serialize either.
    """
    return Frozen(value).load()

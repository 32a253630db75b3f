"""Large arguments a ``.remote()`` passes by value: each one's size, and which object it is.

Ray copies each argument that is not an ``ObjectRef`` into the call it submits: one over
100 KiB goes into the object store, once per call. The same 200 MB array passed to 50
calls is stored 50 times, where one ``ray.put`` and its ref would store it once.
:func:`large_arguments` looks at a call's top-level arguments as it is submitted and
names those of :data:`LARGE_BYTES` or more: where in the call, how many bytes, which
object (a serial number, the same for the same live object in this process), of what
type. The report counts the calls each object went to.

The cost on the ``.remote()`` path: one set lookup per argument of the common types
(numbers, strings, refs, containers), one cached lookup of its type's sizer for the rest.
A size is what the object says of itself (``len`` of bytes; ``nbytes`` of numpy arrays,
arrow tables and arrays, pandas Series and Index, ``memoryview``, torch tensors; a pandas
DataFrame's ``memory_usage`` once it holds 64 Ki cells), never a pickling, never the
contents. Nothing inside lists, dicts or objects is looked at.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import ray

from raytrace_kit._ray_compat.exported import pickled_size
from raytrace_kit._worker import state as worker_state

__all__ = ["LARGE_BYTES", "large_arguments", "large_code", "serial_of", "size_of"]

LARGE_BYTES = 1 << 20  # an argument this large is named in its call.submit record
# A DataFrame has at most 16 bytes a cell without deep=True (complex128; an object column's
# pointers are 8): one of fewer cells is under LARGE_BYTES, and memory_usage() (a quarter
# of a millisecond, as long as a small task) is not asked.
_FRAME_CELLS = LARGE_BYTES // 16

# Types that are never sized: the common small arguments, a set lookup each.
_PLAIN = frozenset({
    int, float, bool, str, complex, type(None), tuple, list, dict, set, frozenset, ray.ObjectRef,
})  # fmt: skip

_Sizer = Callable[[Any], int]
_TYPES_KEPT = 1024  # argument types whose sizers are kept


def _length(value: Any) -> int:
    return len(value)


def _nbytes(value: Any) -> int:
    return operator.index(value.nbytes)


def _frame_bytes(frame: Any) -> int:
    rows, columns = frame.shape
    if rows * columns < _FRAME_CELLS:
        return 0
    return int(frame.memory_usage(index=True, deep=False).sum())


def _sizer(kind: type) -> tuple[_Sizer, str] | None:
    """How to size an argument of type ``kind``, and the type's name; ``None``: never sized.

    Found once per type (:func:`_classify`), then kept (at most :data:`_TYPES_KEPT`).
    """
    sizers = worker_state.state.sizers
    try:
        return sizers[kind]
    except KeyError:
        pass
    if len(sizers) >= _TYPES_KEPT:  # classes made at run time, one per call: start again
        sizers.clear()
    found = sizers[kind] = _classify(kind)
    return found


def _classify(kind: type) -> tuple[_Sizer, str] | None:
    """What type ``kind`` offers to size it (``nbytes``, pandas' ``memory_usage``).

    Never an import of numpy or pandas: only the type's own attributes and module.
    """
    module = kind.__module__ or ""
    # By its package, as users write it: numpy.ndarray, pandas.DataFrame, pyarrow.Table.
    name = f"{module.partition('.')[0]}.{kind.__qualname__}".removeprefix("builtins.")
    if issubclass(kind, (bytes, bytearray)):
        return _length, name
    if getattr(kind, "nbytes", None) is not None:  # numpy, arrow, pandas Series, memoryview
        return _nbytes, name
    if module.partition(".")[0] == "pandas" and hasattr(kind, "memory_usage"):
        return _frame_bytes, name  # a DataFrame: no nbytes of its own
    return None


def size_of(value: Any) -> int:
    """The bytes ``value`` says it holds, as :func:`large_arguments` reads them; 0 if unknown.

    Never raises: an object whose size cannot be read is taken as small.
    """
    kind = type(value)
    if kind in _PLAIN:
        return 0
    try:
        sizer = _sizer(kind)
        return 0 if sizer is None else sizer[0](value)
    except Exception:  # a size property that raises, or is no integer; an odd type
        return 0


def serial_of(value: Any) -> int | None:
    """A number for ``value`` that stays the same while it lives, in this process.

    ``None`` for an object that cannot be weakly referenced (``bytes``, ``bytearray``):
    without a weak reference a new object at a dead one's address (CPython reuses them at
    once) could not be told from the old one. The registry holds weak references only, and
    an entry goes when its object dies.
    """
    state = worker_state.state
    seen = state.large_objects
    key = id(value)
    known = seen.get(key)
    if known is not None and known[0]() is value:
        return known[1]
    try:
        ref = weakref.ref(value, functools.partial(_forget, seen, key))
    except TypeError:
        return None
    serial = next(state.large_serials)
    seen[key] = (ref, serial)
    return serial


def _forget(seen: dict[int, tuple[weakref.ref[Any], int]], key: int, ref: weakref.ref[Any]) -> None:
    """A registered object died: its entry goes, unless a new object holds the address now."""
    known = seen.get(key)
    if known is not None and known[0] is ref:
        del seen[key]


def _entry(where: int | str, value: Any, size: int) -> list[Any]:
    sizer = _sizer(type(value))
    return [where, size, serial_of(value), sizer[1] if sizer else type(value).__name__]


def large_code(remote_functions: Iterable[Any]) -> int | None:
    """The largest size Ray pickled these ``RemoteFunction`` objects to, if LARGE_BYTES or more.

    A function's variants (one per set of options) share its code; the first ``.remote()``
    of each has made Ray's pickle (its closure, and the globals a function of ``__main__``
    uses), read here as Ray keeps it.
    """
    largest = max((pickled_size(remote) or 0 for remote in remote_functions), default=0)
    return largest if largest >= LARGE_BYTES else None


def large_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[list[Any]] | None:
    """The call's top-level arguments of :data:`LARGE_BYTES` or more; ``None`` if none.

    Each is ``[where, bytes, serial, type]``: ``where`` its position, or its keyword's
    name (a parameter's name, never a value: a ``**`` keyword that is no identifier is
    written ``"**"``); ``serial`` from :func:`serial_of`. Never raises.
    """
    found: list[list[Any]] | None = None
    try:
        for position, value in enumerate(args):
            if type(value) in _PLAIN:
                continue
            size = size_of(value)
            if size >= LARGE_BYTES:
                found = found or []
                found.append(_entry(position, value, size))
        for name, value in kwargs.items():
            if type(value) in _PLAIN:
                continue
            size = size_of(value)
            if size >= LARGE_BYTES:
                found = found or []
                shown = name if name.isidentifier() and len(name) <= 100 else "**"
                found.append(_entry(shown, value, size))
    except Exception:  # a record without sizes, never a submission broken
        return found
    return found

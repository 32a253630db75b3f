"""A failed call's locals, frame by frame: each one's type and shape; with ``log_args``, its value.

What ``call.end`` carries as ``frames_locals`` (:func:`frames_locals`): read from the
exception's traceback when a call fails, and only then, so a call that succeeds costs
nothing. Each frame of the user's code (not the kit's, Ray's or the standard library's)
is ``[file, line, function, {name: description}]``, outermost first, as the traceback
prints them; with ``log_args=True`` a fifth member, ``{name: value}``.

A description (:func:`describe`) is made without running the user's code: no
``__repr__``, ``__len__`` or property of a user's class is called. The length of a
builtin string, bytes or container (read through the builtin's own method, whatever a
subclass overrides), the shape and dtype of the objects of numpy, pandas, pyarrow,
polars and torch (read from those packages' own attributes), else the type's name. A
value is a short ``repr`` (:func:`raytrace_kit._output.redact.shown_value`): those under
secret-looking names are ``<redacted>``, and the environment's are never shown.
"""

from __future__ import annotations

import collections
import enum
import os
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raytrace_kit._output import writer
from raytrace_kit._output.frames import in_stdlib, on_call_path
from raytrace_kit._output.redact import (
    REDACTED,
    environment_values,
    is_secret_key,
    shown_value,
)
from raytrace_kit._output.tracebacks import KIT_DIR

if TYPE_CHECKING:
    from types import FrameType

    from raytrace_kit._options import CallSpec

__all__ = [
    "DESCRIPTION_CHARS",
    "LOCALS_CHARS",
    "MAX_FRAMES",
    "MAX_LOCALS",
    "MORE",
    "NAME_CHARS",
    "describe",
    "failed_locals",
    "frames_locals",
]

# The caps, documented in docs/post-mortem.md: the innermost frames (the user's own code
# first), the first locals of each (parameters come first), each name and description cut.
MAX_FRAMES = 20
MAX_LOCALS = 30
NAME_CHARS = 60
DESCRIPTION_CHARS = 100
# The whole record, about: past it the outermost frames go (one call.end stays one line
# that a reader decodes in microseconds, whatever a frame holds).
LOCALS_CHARS = 16384
MORE = "..."  # the name under which a frame says how many locals were left out (no identifier)
_CHAIN = 8  # exceptions of a chain (raise ... from, errors during handling) looked at
_NOT_FAILURES = (SystemExit, GeneratorExit)  # they end a call on purpose: nothing to look into

# The classes of data packages that say their shape (``len`` for arrow's arrays) and dtype
# cheaply, from what they hold: by package and class, matched along a type's MRO (a
# subclass, pyarrow's Int64Array, is one). No other attribute of theirs is read: some
# compute (pandas' SeriesGroupBy.dtype applies a function to every group).
_DATA: dict[tuple[str, str], tuple[str, str | None]] = {
    ("numpy", "ndarray"): ("shape", "dtype"),
    ("pandas", "DataFrame"): ("shape", None),
    ("pandas", "Series"): ("shape", "dtype"),
    ("pandas", "Index"): ("shape", "dtype"),
    ("pyarrow", "Table"): ("shape", None),
    ("pyarrow", "RecordBatch"): ("shape", None),
    ("pyarrow", "Array"): ("__len__", "type"),
    ("pyarrow", "ChunkedArray"): ("__len__", "type"),
    ("polars", "DataFrame"): ("shape", None),
    ("polars", "Series"): ("shape", "dtype"),
    ("torch", "Tensor"): ("shape", "dtype"),
}
_NUMBERS = frozenset({bool, int, float, complex})
# Builtin containers, counted through their own __len__ (a subclass's override not run).
_SIZED: tuple[tuple[type, Callable[[Any], int], str], ...] = (
    (dict, dict.__len__, "key"),
    (list, list.__len__, ""),
    (tuple, tuple.__len__, ""),
    (set, set.__len__, ""),
    (frozenset, frozenset.__len__, ""),
    (collections.deque, collections.deque.__len__, ""),
)
_SITE = ("site-packages" + os.sep, "dist-packages" + os.sep)


def _function_locals() -> Any:
    return sys._getframe().f_locals


# What a function frame's f_locals is: a dict, or from Python 3.13 a proxy of the frame.
_PROXY = type(_function_locals())
# Read through type itself: a metaclass of the user's could answer otherwise, running code.
_QUALNAME = type.__dict__["__qualname__"]
_MODULE = type.__dict__["__module__"]
_MRO = type.__dict__["__mro__"]


def failed_locals(error: BaseException, spec: CallSpec) -> list[list[Any]]:
    """What a failed call's ``call.end`` records of its locals; never raises.

    :func:`frames_locals` of ``error``, with values when the call's options ask for its
    arguments (``log_args``). Nothing for an exception that ends a call on purpose
    (``SystemExit``, ``GeneratorExit``). A failure to describe them records none and is
    reported once per process (a warning and an ``instrumentation.error`` line): the call
    and its exception go on untouched.
    """
    if isinstance(error, _NOT_FAILURES):
        return []
    try:
        return frames_locals(error, values=spec.options.log_args)
    except Exception as exc:
        writer.report_failure("locals", "cannot record the locals of the failed call", exc)
        return []


def frames_locals(error: BaseException, *, values: bool = False) -> list[list[Any]]:
    """The locals of the user's frames of ``error``'s traceback, outermost first.

    Each frame is ``[file, line, function, {name: description}]``, and with ``values``
    (``log_args=True``) ``[..., {name: value}]``. The frames of a chained exception (its
    cause, the error it was raised while handling) come first, as the traceback prints
    them. At most :data:`MAX_FRAMES` frames (the innermost, the user's own code before
    installed packages'), :data:`MAX_LOCALS` locals each (then a :data:`MORE` entry saying
    how many more), names cut at :data:`NAME_CHARS`. Dunder names (a module's
    ``__builtins__``) are left out, and so is the value of ``self`` and ``cls``, as
    ``log_args`` leaves them out of arguments.
    """
    entries = _chosen(_user_entries(error))
    hidden = environment_values() if values else ()
    frames = [_frame(frame, line, values, hidden) for frame, line in entries]
    size = sum(_size(frame) for frame in frames)
    while len(frames) > 1 and size > LOCALS_CHARS:
        size -= _size(frames.pop(0))
    return frames


def _user_entries(error: BaseException) -> list[tuple[FrameType, int]]:
    """``(frame, line)`` of each user frame of ``error``'s chain, in the traceback's order."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    part: BaseException | None = error
    while part is not None and id(part) not in seen and len(chain) < _CHAIN:
        seen.add(id(part))
        chain.append(part)
        part = part.__cause__ or (None if part.__suppress_context__ else part.__context__)
    entries: list[tuple[FrameType, int]] = []
    done: set[tuple[int, int]] = set()
    for part in reversed(chain):  # the first cause is printed first
        tb = part.__traceback__
        while tb is not None:
            frame, line = tb.tb_frame, tb.tb_lineno
            if (id(frame), line) not in done and _users(frame.f_code.co_filename):
                done.add((id(frame), line))
                entries.append((frame, line))
            tb = tb.tb_next
    return entries


def _users(filename: str) -> bool:
    """Whether code of ``filename`` is the user's: not the kit's, Ray's or the stdlib's."""
    if filename.startswith((KIT_DIR, "<frozen ")) or on_call_path(filename):
        return False
    ray = _ray_dir()
    return not (ray is not None and filename.startswith(ray)) and not in_stdlib(filename)


def _ray_dir() -> str | None:
    """Ray's own directory, when Ray is imported (installed editable, outside site-packages)."""
    ray = sys.modules.get("ray")
    location = getattr(ray, "__file__", None)
    return None if location is None else os.path.join(os.path.dirname(location), "")


def _chosen(entries: list[tuple[FrameType, int]]) -> list[tuple[FrameType, int]]:
    """At most :data:`MAX_FRAMES` entries, the innermost: the user's own code first.

    Installed packages' frames (pandas' internals under the user's call of it) fill what
    room is left, so that a deep library stack does not push the user's frames out.
    """
    if len(entries) <= MAX_FRAMES:
        return entries
    own = [i for i, (frame, _) in enumerate(entries) if not _installed(frame.f_code.co_filename)]
    kept = set(own[-MAX_FRAMES:])
    others = [i for i in range(len(entries)) if i not in kept]
    room = MAX_FRAMES - len(kept)
    kept.update(others[len(others) - room :] if room else ())
    return [entry for i, entry in enumerate(entries) if i in kept]


def _installed(filename: str) -> bool:
    """Whether code of ``filename`` is an installed package's (a third party's, usually)."""
    return _SITE[0] in filename or _SITE[1] in filename


def _frame(frame: FrameType, line: int, values: bool, hidden: tuple[str, ...]) -> list[Any]:
    code = frame.f_code
    described: dict[str, str] = {}
    shown: dict[str, str] = {}
    left_out = 0
    for name, value in _items(frame):
        if type(name) is not str or not name.isidentifier() or _dunder(name):
            continue  # a comprehension's ".0", a module's __builtins__
        if len(described) >= MAX_LOCALS:
            left_out += 1
            continue
        key = name[:NAME_CHARS]
        described[key] = describe(value)
        if values and name not in {"self", "cls"}:
            shown[key] = REDACTED if is_secret_key(name) else shown_value(value, hidden)
    if left_out:
        described[MORE] = f"{left_out} more"
    record: list[Any] = [code.co_filename, line, code.co_name, described]
    if values:
        record.append(shown)
    return record


def _items(frame: FrameType) -> list[tuple[Any, Any]]:
    """A frame's locals, read without running the user's code.

    A function's are the interpreter's (a dict, or Python 3.13's proxy of them); a class
    body's are whatever its metaclass's ``__prepare__`` made: a dict is read through dict's
    own method, another mapping not at all (its ``items`` would be the user's code).
    """
    namespace: Any = frame.f_locals
    kind = type(namespace)
    if kind is _PROXY or kind is dict:
        return list(namespace.items())
    if issubclass(kind, dict):
        return list(dict.items(namespace))
    return []


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _size(frame: list[Any]) -> int:
    """About the characters of a frame's JSON (no encoding: the cap need not be exact)."""
    size = len(frame[0]) + len(frame[2]) + 16
    for members in frame[3:]:
        size += sum(len(name) + len(text) + 6 for name, text in members.items())
    return size


def describe(value: object) -> str:
    """What ``value`` is, without its value: ``int``, ``str of 40 chars``, ``dict of 3 keys``.

    No code of the value's own class runs (its ``__repr__``, ``__len__``, properties);
    numpy, pandas, pyarrow, polars and torch objects say their shape and dtype
    (``ndarray of 1000x12 float64``, ``DataFrame of 1000x12``). Never raises; at most
    :data:`DESCRIPTION_CHARS` characters.

    Examples:
        >>> describe({"a": 1, "b": 2})
        'dict of 2 keys'
        >>> describe("x" * 40)
        'str of 40 chars'
    """
    try:
        text = _described(value)
    except Exception:  # an odd type (a shape that raises): its name will do
        try:
            text = _type_name(type(value))
        except Exception:
            text = "?"
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 3] + "..."


def _described(value: Any) -> str:  # noqa: PLR0911 -- one answer per kind of value
    kind = type(value)
    if value is None:
        return "None"
    if kind in _NUMBERS:
        return kind.__name__
    name = _type_name(kind)
    if issubclass(kind, enum.Enum):  # a member of a str or int enum too: its class says more
        return name
    # issubclass of the type, never isinstance: isinstance asks a user's __class__.
    if issubclass(kind, str):
        count = str.__len__(value)
        return f"{name} of {count} char{'' if count == 1 else 's'}"
    if issubclass(kind, (bytes, bytearray)):
        count = bytes.__len__(value) if issubclass(kind, bytes) else bytearray.__len__(value)
        return f"{name} of {_bytes(count)}"
    if kind is memoryview:
        return f"memoryview of {_bytes(value.nbytes)}"
    for base, length, unit in _SIZED:
        if issubclass(kind, base):
            count = length(value)
            if not unit:
                return f"{name} of {count}"
            return f"{name} of {count} {unit}{'' if count == 1 else 's'}"
    if kind is types.FunctionType:
        return f"function {value.__qualname__.rpartition('<locals>.')[2]}"
    if kind is types.ModuleType:
        return f"module {value.__name__}"
    if issubclass(kind, type):
        return f"class {_type_name(value)}"
    return _data(value, kind, name)


def _type_name(kind: type) -> str:
    """A type's ``__qualname__`` from its last ``<locals>.`` on, read through ``type`` itself.

    ``Order.Item``, and ``Order`` for a class made inside a function; never a metaclass of
    the user's asked.
    """
    return str(_QUALNAME.__get__(kind)).rpartition("<locals>.")[2]


def _package(kind: type) -> str:
    return str(_MODULE.__get__(kind) or "").partition(".")[0]


def _data(value: Any, kind: type, name: str) -> str:
    """A numpy, pandas, pyarrow, polars or torch object: ``ndarray of 1000x12 float64``.

    Only the attributes :data:`_DATA` names for one of the type's classes are read; any
    other object is its type's name.
    """
    known = next(
        (_DATA[key] for key in ((_package(c), _type_name(c)) for c in _MRO.__get__(kind))
         if key in _DATA),
        None,
    )  # fmt: skip
    if known is None:  # and numpy's scalars (float64), pandas' Timestamp: their names say it
        return name
    size, dtype = known
    dims = str(len(value)) if size == "__len__" else _dims(getattr(value, size))
    parts = [name if dims is None else f"{name} of {dims}"]
    if dtype is not None:
        parts.append(str(getattr(value, dtype)))
    return " ".join(parts)


def _dims(shape: object) -> str | None:
    """``1000x12`` for a shape of ints (``0-d`` for ``()``); ``None`` for another kind of shape."""
    if not isinstance(shape, tuple) or not all(type(d) is int for d in shape):
        return None  # a lazy frame's unknown sizes
    return "x".join(map(str, shape)) if shape else "0-d"


def _bytes(count: int) -> str:
    """``40 B``, ``3.4 KiB``, ``1.2 MiB``, ``2.0 GiB``."""
    if count < 1024:
        return f"{count} B"
    if count < 1024**2:
        return f"{count / 1024:.1f} KiB"
    if count < 1024**3:
        return f"{count / 1024**2:.1f} MiB"
    return f"{count / 1024**3:.1f} GiB"

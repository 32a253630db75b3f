"""check_serializable(): find every value Ray could not ship, and say where it came from.

It walks what ``ray.util.inspect_serializability`` walks (a function's globals and
nonlocals via ``inspect.getclosurevars``, an object's members) and judges each value with
Ray's own serializer (``ray.cloudpickle``). Where Ray's tool stops at the first failure on
each level and does not look inside dicts, lists, tuples or sets, this walk names every
failing member on a level and the exact element inside containers and dataclasses, so the
report points at ``config['pool']`` rather than at ``config``. Objects of library classes
(a pool, a lock, a client) are named themselves: their internals are not the user's to fix.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import io
import itertools
import os
import sys
import sysconfig
from collections.abc import Iterator
from typing import Any

import ray.cloudpickle

from raytrace_kit import _ray_compat, _registry
from raytrace_kit._serialization.report import Scope, SerializationFailure, SerializationReport

__all__ = ["check_serializable"]

_MAX_CHILDREN = 200  # per object: enough for real closures and configs, bounded for huge ones
_ERROR_CHARS = 300


def check_serializable(
    obj: Any,
    *,
    name: str | None = None,
    depth: int = 3,
    scope: Scope | None = None,
) -> SerializationReport:
    """Check whether Ray can serialize ``obj``; if not, name every value that prevents it.

    Functions are checked with the globals and nonlocals they capture, classes with their
    methods, instances with their attributes (dataclass fields and ``__slots__`` too), and
    containers (dict, list, tuple, set) element by element.

    Args:
        obj: A function, class, instance or container.
        name: The name to report it under (default: its qualified name or type).
        depth: How many levels below ``obj`` to look into (a failure deeper than that is
            reported at the deepest level looked at).
        scope: The scope to report ``obj`` itself under if it fails as a whole (used for
            call arguments and return values).

    Returns:
        The report: ``.ok``, ``.failures``, a readable ``str()`` and ``_repr_html_``.

    Example:
        >>> import threading
        >>> lock = threading.Lock()
        >>> def uses_lock():
        ...     with lock:
        ...         pass
        >>> print(check_serializable(uses_lock))  # doctest: +SKIP
        uses_lock: NOT serializable (cannot pickle '_thread.lock' object)
        └─ uses_lock.lock  [global] _thread.lock
    """
    root = name or _display_name(obj)
    error = _serialization_error(obj)
    if error is None:
        return SerializationReport(root, ok=True)
    # Call data (arguments, return values) gets a second name by position and type, for the
    # event files: a dict key or a set member may be a secret (docs/reliability.md).
    walker = _Walker(depth)
    walker.visit(
        obj,
        (root, root),
        path=((root, root),),
        scope=scope or "argument",
        depth=depth,
        error=error,
    )
    return SerializationReport(root, ok=False, failures=tuple(walker.failures), error=error)


# Exact types that always pickle: no need to serialize a large bytes object to know.
_ALWAYS_SERIALIZABLE = frozenset({type(None), bool, int, float, complex, str, bytes, bytearray})


# Ray ships these by reference; pickling them here would make Ray pin the objects they refer
# to (out-of-band serialization), or raise where that is turned off. A stub stands in.
_BY_REFERENCE = tuple(
    t
    for t in (ray.ObjectRef, ray.actor.ActorHandle, getattr(ray, "ObjectRefGenerator", None))
    if isinstance(t, type)
)


class _Pickler(_ray_compat.CloudPickler):  # type: ignore[misc]  # untyped base
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, _BY_REFERENCE):
            return (type(None), ())
        return super().reducer_override(obj)


def _serialization_error(obj: Any) -> str | None:
    if type(obj) in _ALWAYS_SERIALIZABLE or isinstance(obj, _BY_REFERENCE):
        return None
    try:
        _Pickler(io.BytesIO(), protocol=5).dump(obj)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
    return None


class _Walker:
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.failures: list[SerializationFailure] = []
        self.seen: set[int] = set()

    def visit(
        self,
        obj: Any,
        name: tuple[str, str],
        *,
        path: tuple[tuple[str, str], ...],
        scope: Scope,
        depth: int,
        error: str,
    ) -> None:
        """Record ``obj`` (known to fail), or the failing values below it if any.

        Names and path segments come in pairs: (as in the code, by position and type).
        """
        self.seen.add(id(obj))
        found_below = False
        if depth > 0:
            for child_name, child, child_scope, segment in _children(obj):
                if id(child) in self.seen:
                    continue
                child_error = _serialization_error(child)
                if child_error is None:
                    continue
                found_below = True
                # An element is named from its container: config['pool'], handlers[2].
                shown = (
                    (f"{name[0]}{segment[0]}", f"{name[1]}{segment[1]}")
                    if child_scope == "item"
                    else child_name
                )
                self.visit(
                    child,
                    shown,
                    path=(*path, segment),
                    scope=child_scope,
                    depth=depth - 1,
                    error=child_error,
                )
        if not found_below:
            self.failures.append(
                SerializationFailure(
                    name[0],
                    tuple(p[0] for p in path),
                    scope,
                    _type_name(obj),
                    _short(error),
                    safe_name=name[1],
                    safe_path=tuple(p[1] for p in path),
                )
            )


_Pair = tuple[str, str]


def _children(obj: Any) -> Iterator[tuple[_Pair, Any, Scope, _Pair]]:
    """(name, value, scope, path segment) of everything ``obj`` makes the pickler visit.

    Names and segments are pairs: as written in code, and by position and type only.
    """
    return (
        (_pair(name), value, scope, _pair(segment))
        for name, value, scope, segment in itertools.islice(_raw_children(obj), _MAX_CHILDREN)
    )


def _pair(label: str | _Pair) -> _Pair:
    return label if isinstance(label, tuple) else (label, label)


def _raw_children(obj: Any) -> Iterator[tuple[str | _Pair, Any, Scope, str | _Pair]]:
    if isinstance(obj, _ray_compat.RemoteFunction):
        obj = _ray_compat.python_function_of(obj)  # the Python function Ray pickles
    if isinstance(obj, dict | list | tuple | set | frozenset):
        yield from _container_children(obj)
    elif inspect.isfunction(obj):
        yield from _function_children(obj)
    elif inspect.ismethod(obj):
        yield "__self__", obj.__self__, "attribute", "__self__"
        yield from _function_children(obj.__func__)
    elif isinstance(obj, functools.partial):
        yield "func", obj.func, "attribute", "func"
        for i, arg in enumerate(obj.args):
            yield f"args[{i}]", arg, "item", f"args[{i}]"
        for key, value in obj.keywords.items():
            yield key, value, "item", key
    elif inspect.isclass(obj):
        for attr, member in list(vars(obj).items()):
            if attr.startswith("__") and attr.endswith("__"):
                continue
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__  # noqa: PLW2901 -- the function inside
            yield attr, member, "attribute", attr
    else:
        yield from _instance_children(obj)


def _container_children(obj: Any) -> Iterator[tuple[_Pair, Any, Scope, _Pair]]:
    if isinstance(obj, dict):
        for i, (key, value) in enumerate(list(obj.items())):
            label = (f"[{key!r}]", f"[<{type(key).__name__} key #{i}>]")
            yield label, value, "item", label
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            yield _pair(f"[{i}]"), value, "item", _pair(f"[{i}]")
    else:  # a set: elements have no position, so they are named by value (or by type)
        for i, value in enumerate(list(obj)):
            label = (
                "{" + _short(repr(value), 40) + "}",
                "{<" + type(value).__name__ + f" #{i}>" + "}",
            )
            yield label, value, "item", label


def _function_children(fn: Any) -> Iterator[tuple[str, Any, Scope, str]]:
    try:
        captured = inspect.getclosurevars(fn)
    except (TypeError, ValueError):
        return
    for var, value in captured.globals.items():
        if not inspect.ismodule(value):
            yield var, value, "global", var
    for var, value in captured.nonlocals.items():
        yield var, value, "nonlocal", var


def _instance_children(obj: Any) -> Iterator[tuple[str, Any, Scope, str]]:
    if not _is_user_data(type(obj)):
        # A pool, a lock, a client: the object itself is the culprit to name, not the
        # internals of a library class or of a class with its own pickling rules.
        return
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            if hasattr(obj, field.name):
                yield field.name, getattr(obj, field.name), "attribute", field.name
        return
    attributes = getattr(obj, "__dict__", None)
    if isinstance(attributes, dict):
        for attr, value in list(attributes.items()):
            yield attr, value, "attribute", attr
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()) or ():
            special = slot in {"__dict__", "__weakref__"}
            if isinstance(slot, str) and not special and hasattr(obj, slot):
                yield slot, getattr(obj, slot), "attribute", slot


_LIBRARY_PATHS = tuple(
    {
        os.path.realpath(path)
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if (path := sysconfig.get_paths().get(key))
    }
)


# Verdicts on classes: worth opening attribute by attribute? Forgotten by a reset.
_USER_DATA_TYPES: dict[type, bool] = {}
_registry.register(_USER_DATA_TYPES.clear, layer=_registry.OUTPUT)


def _is_user_data(cls: type) -> bool:
    """Whether instances of ``cls`` are worth opening, attribute by attribute.

    True for dataclasses and for classes of the user's own code that pickle through their
    attributes (no custom ``__reduce__``/``__getstate__``).
    """
    verdicts = _USER_DATA_TYPES
    known = verdicts.get(cls)
    if known is None:
        known = verdicts[cls] = _judge_user_data(cls)
    return known


def _judge_user_data(cls: type) -> bool:
    if dataclasses.is_dataclass(cls):
        return True
    custom = any(
        name in vars(klass)
        for klass in cls.__mro__
        if klass is not object
        for name in ("__reduce__", "__reduce_ex__", "__getstate__")
    )
    if custom:
        return False
    if cls.__module__ == "__main__":
        return True  # the user's script, or a notebook's cells (whose __main__ has no file)
    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return False  # built in, or created without a module: a library type
    return not os.path.realpath(file).startswith(_LIBRARY_PATHS)


def _display_name(obj: Any) -> str:
    if isinstance(obj, _ray_compat.RemoteFunction):
        obj = _ray_compat.python_function_of(obj)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(qualname, str) and (inspect.isfunction(obj) or inspect.isclass(obj)):
        return qualname
    return f"<{_type_name(obj)} object>"


def _type_name(obj: Any) -> str:
    cls = obj if inspect.isclass(obj) else type(obj)
    module = getattr(cls, "__module__", "")
    prefix = "" if module in {"builtins", None, ""} else f"{module}."
    return f"{prefix}{cls.__qualname__}"


def _short(text: str, limit: int = _ERROR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."

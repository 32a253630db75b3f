"""A Ray Data callable class as calls: a subclass named as the user's, recorded.

Ray Data instantiates the class in each actor of its pool and calls the instance per batch.
The subclass :func:`data_class` makes keeps the user's name, module and qualified name
(Ray Data names the operator after it), ``isinstance`` and ``super()``; its ``__init__`` is
one call per actor, its ``__call__`` one call per batch, sync, a coroutine or an async
generator as the user's is (Ray Data picks how to run a UDF by that). A replay keeps the
instance's state: the user's attributes, not the thread pool Ray Data's own subclass adds.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from raytrace_kit._worker import boundary
from raytrace_kit._worker.data_udf import (
    MARK,
    Specs,
    run_batch,
    run_batch_async,
    run_batch_async_generator,
    run_batch_generator,
    run_row,
)

__all__ = ["data_class"]

_OBJECT_GETSTATE = getattr(object, "__getstate__", None)  # Python 3.11 added it


def data_class(cls: type, specs: Specs, *, rows: bool = False) -> type:
    """A subclass of the callable class ``cls`` whose construction and calls are recorded.

    It keeps ``cls``'s name, module and qualified name; ``isinstance(x, cls)`` holds and
    ``super()`` in the user's methods works as before. ``rows``: called per row.
    """
    user_init = cls.__init__  # type: ignore[misc]
    user_call = cls.__call__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        remember_ray_attributes(self)  # what Ray Data's own subclass set first
        bound = user_init.__get__(self, type(self))
        if specs.init is None:
            bound(*args, **kwargs)
        else:
            boundary.run(specs.init, bound, args, kwargs, id(self))

    if rows:

        def row_call(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
            bound = user_call.__get__(self, type(self))  # batch: a row here
            if specs.call is None:
                return bound(batch, *args, **kwargs)
            return run_row(specs.call, bound, batch, args, kwargs)

        chosen: Callable[..., Any] = row_call
    elif inspect.iscoroutinefunction(user_call):

        async def coroutine_call(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
            bound = user_call.__get__(self, type(self))
            if specs.call is None:
                return await bound(batch, *args, **kwargs)
            return await run_batch_async(specs.call, user_call, batch, args, kwargs, self)

        chosen = coroutine_call
    elif inspect.isasyncgenfunction(user_call):

        async def async_generator_call(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
            bound = user_call.__get__(self, type(self))
            if specs.call is None:
                calls = bound(batch, *args, **kwargs)
            else:
                calls = run_batch_async_generator(specs.call, user_call, batch, args, kwargs, self)
            async for item in calls:
                yield item

        chosen = async_generator_call
    else:
        generator = inspect.isgeneratorfunction(user_call)

        def plain_call(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
            bound = user_call.__get__(self, type(self))
            spec = specs.call
            if spec is None:
                return bound(batch, *args, **kwargs)
            if generator:
                return run_batch_generator(spec, user_call, batch, args, kwargs, self)
            return run_batch(spec, user_call, batch, args, kwargs, self)

        chosen = plain_call
    chosen.__name__ = "__call__"
    chosen.__qualname__ = f"{cls.__qualname__}.__call__"
    namespace: dict[str, Any] = {
        "__init__": __init__,
        "__call__": chosen,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        MARK: cls,
    }
    if getattr(cls, "__getstate__", None) is _OBJECT_GETSTATE:  # the user's own is theirs
        namespace["__getstate__"] = _users_state
    return type(cls)(cls.__name__, (cls,), namespace)


# id of a callable class's instance -> the attributes Ray Data's subclass set before its
# __init__ ran (a replay keeps the instance's state: the user's, not Ray Data's machinery)
_RAY_ATTRIBUTES: dict[int, frozenset[str]] = {}


def remember_ray_attributes(instance: Any) -> None:
    """Note what Ray Data's subclass set before the user's ``__init__`` (its thread pool).

    A module function, called by name: the class's ``__init__`` travels by value in Ray's
    pickle, and a global it used directly would be a copy in the worker.
    """
    _RAY_ATTRIBUTES[id(instance)] = frozenset(getattr(instance, "__dict__", ()))


def _users_state(self: Any) -> Any:
    """The instance's state as pickle keeps it, less what Ray Data's subclass added."""
    if not hasattr(self, "__dict__") or _OBJECT_GETSTATE is None:
        return _OBJECT_GETSTATE(self) if _OBJECT_GETSTATE is not None else None
    ray_own = _RAY_ATTRIBUTES.get(id(self), frozenset())
    return {name: value for name, value in vars(self).items() if name not in ray_own}

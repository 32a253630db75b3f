"""Instrumenting user code: the function or class Ray ships, with the boundary baked in."""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, TypeVar

from raytrace_kit._options import CallSpec, DebugOptions, qualified_name
from raytrace_kit._output.context import CURRENT_CALL
from raytrace_kit._worker.boundary import run, run_async, run_async_generator, run_generator

__all__ = ["instrument_class", "instrument_function"]

_T = TypeVar("_T")


def instrument_function(fn: Callable[..., Any], options: DebugOptions) -> Callable[..., Any]:
    """Return the function Ray runs as a task in place of ``fn``.

    The result keeps ``fn``'s name, module, docs, ``__wrapped__`` and kind (plain or
    generator), so Ray validates arguments against ``fn``'s signature at submission and
    treats a generator as a generator task.
    """
    spec = CallSpec(qualified_name(fn), "task", options)
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generator_task(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            return (yield from run_generator(spec, fn, args, kwargs))

        return generator_task

    @functools.wraps(fn)
    def task(*args: Any, **kwargs: Any) -> Any:
        return run(spec, fn, args, kwargs)

    return task


def _inside_call_of(instance: object) -> bool:
    """Whether a call of this same actor instance is running in this context.

    A method calling another method of its own instance (``self.helper()``) is part of
    the running call, not a new one: such calls pass straight through.
    """
    active = CURRENT_CALL.get()
    return active is not None and active.owner == id(instance)


def _instrument_method(method: Callable[..., Any], spec: CallSpec) -> Callable[..., Any]:
    # These closures are pickled by value with the class: they may reference only
    # module-level names (pickled by reference), spec and method.
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def async_method(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _inside_call_of(self):
                return await method(self, *args, **kwargs)
            return await run_async(spec, method, (self, *args), kwargs, id(self))

        return async_method
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def async_generator_method(
            self: Any, *args: Any, **kwargs: Any
        ) -> AsyncIterator[Any]:
            if _inside_call_of(self):
                inner = method(self, *args, **kwargs)
            else:
                inner = run_async_generator(spec, method, (self, *args), kwargs, id(self))
            async for item in inner:
                yield item

        return async_generator_method
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator_method(self: Any, *args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            if _inside_call_of(self):
                return (yield from method(self, *args, **kwargs))
            return (yield from run_generator(spec, method, (self, *args), kwargs, id(self)))

        return generator_method

    @functools.wraps(method)
    def sync_method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _inside_call_of(self):
            return method(self, *args, **kwargs)
        return run(spec, method, (self, *args), kwargs, id(self))

    return sync_method


def _default_init(self: Any) -> None:
    """Stand-in ``__init__`` for classes without one, so actor creation is a call too."""


def _actor_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """Instance methods of ``cls`` (own and inherited) that Ray can call remotely."""
    methods: dict[str, Callable[..., Any]] = {}
    for klass in reversed(cls.__mro__[:-1]):  # base classes first, object excluded
        for name, attr in vars(klass).items():
            if name.startswith("__") and name != "__init__":
                methods.pop(name, None)
                continue
            if inspect.isfunction(attr):
                methods[name] = attr
            else:
                # A staticmethod, classmethod or property overriding a base method.
                methods.pop(name, None)
    return methods


def instrument_class(cls: type[_T], options: DebugOptions) -> type[_T]:
    """Return a subclass of ``cls`` whose ``__init__`` and methods are instrumented.

    Sync, ``async def``, generator and async generator methods keep their kind, and
    ``@ray.method(...)`` settings (copied with the function's ``__dict__``) keep working.
    The subclass keeps the name, qualified name, module and docs of ``cls``.
    """
    prefix = qualified_name(cls)
    namespace: dict[str, Any] = {}
    methods = _actor_methods(cls)
    if "__init__" not in methods:
        methods["__init__"] = _default_init
    for name, method in methods.items():
        kind = "actor_init" if name == "__init__" else "actor_method"
        spec = CallSpec(f"{prefix}.{name}", kind, options)
        namespace[name] = _instrument_method(method, spec)
    instrumented = types.new_class(cls.__name__, (cls,), exec_body=lambda ns: ns.update(namespace))
    instrumented.__qualname__ = cls.__qualname__
    instrumented.__module__ = cls.__module__
    instrumented.__doc__ = cls.__doc__
    return instrumented

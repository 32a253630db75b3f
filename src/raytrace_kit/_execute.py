"""Worker side: the one boundary around each call (context, events, memory figures).

The driver bakes a :class:`CallSpec` into the function or class Ray ships, so a worker
never reads driver state. Everything here runs in the process that executes the call.
Instrumentation failures are caught at this boundary and reported; the user's call runs
and its result or exception passes through untouched.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import time
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from raytrace_kit import _events, _identity, _profiling
from raytrace_kit._options import DebugOptions
from raytrace_kit._serialization import check_serializable, reject

__all__ = ["CallSpec", "instrument_class", "instrument_function"]

_T = TypeVar("_T")
_ERROR_CHARS = 2000  # enough for any useful message; bounds one runaway str(exc)


@dataclass(frozen=True, slots=True)
class CallSpec:
    """What the worker needs to know about the callable it instruments.

    Attributes:
        function: Qualified name (``module.function`` or ``module.Class.method``).
        kind: ``task``, ``actor_init`` or ``actor_method``.
        options: The raytrace_kit options in force for these calls.
    """

    function: str
    kind: str
    options: DebugOptions
    # Derived once on the driver and shipped with the spec, so workers never re-render.
    fields: dict[str, str] = field(init=False, compare=False, repr=False)
    fragment: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        fields = {"function": self.function, "kind": self.kind}
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "fragment", _events.spec_fragment(fields))


def _begin(
    spec: CallSpec, owner: int | None, mode: str, actor_id: str | None
) -> _events.ActiveCall | None:
    try:
        call = _events.ActiveCall(spec.fields, spec.fragment, mode, owner, actor_id)
        if spec.options.log:
            call.capture()
            _events.emit_call("call.start", "info", call)
    except Exception as exc:
        _events.report_failure("begin-call", "cannot instrument the call", exc)
        return None
    return call


def _end(
    spec: CallSpec, call: _events.ActiveCall | None, exc: BaseException | None, extra: str = ""
) -> None:
    if call is None or not spec.options.log:
        return
    try:
        duration = time.perf_counter() - call.started
        if exc is None:
            status = ',"status":"ok"'
        else:
            status = "," + _events.encode_members(
                {
                    "status": "error",
                    "error_type": type(exc).__name__,
                    "error": str(exc)[:_ERROR_CHARS],
                }
            )
        tail = f',"duration_s":{duration:.6f}{status},{_identity.memory_members()}{extra}'
        _events.emit_call("call.end", "info" if exc is None else "error", call, tail)
    except Exception as exc2:
        _events.report_failure("end-call", "cannot record the end of the call", exc2)


class _Boundary:
    """The one error boundary around a call, usable in sync, generator and async code.

    Entering captures the call and makes it current; leaving records how it ended and
    restores the previous context. It never suppresses the user's exception.
    """

    __slots__ = ("actor_id", "call", "mode", "owner", "profile", "spec", "token")

    def __init__(
        self, spec: CallSpec, owner: int | None, *, mode: str = "ray", actor_id: str | None = None
    ) -> None:
        self.spec = spec
        self.owner = owner
        self.mode = mode
        self.actor_id = actor_id

    def __enter__(self) -> None:
        self.call = call = _begin(self.spec, self.owner, self.mode, self.actor_id)
        self.token = _events.CURRENT_CALL.set(call)
        self.profile = None
        if self.spec.options.profile is not None and call is not None:
            try:
                self.profile = _profiling.start_call(self.spec, call)
            except Exception as exc:
                _events.report_failure("profile", "cannot start the profiler", exc)

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        # A generator resumed from another context cannot reset there: the var belongs
        # to that context and is discarded with it.
        with contextlib.suppress(ValueError, RuntimeError):
            _events.CURRENT_CALL.reset(self.token)
        tail = ""
        if self.profile is not None:
            try:
                tail = self.profile.finish(exc)
            except Exception as error:
                _events.report_failure("profile-end", "cannot finish the profile", error)
        _end(self.spec, self.call, exc, tail)


def run(
    spec: CallSpec,
    fn: Callable[..., _T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    *,
    mode: str = "ray",
    actor_id: str | None = None,
) -> _T:
    """Run ``fn(*args, **kwargs)`` as one instrumented call.

    ``mode`` is ``ray`` in a Ray worker (ids come from Ray) or ``local`` in local mode
    (no Ray task; ``actor_id`` is the local actor's id, if any).
    """
    with _Boundary(spec, owner, mode=mode, actor_id=actor_id):
        result = fn(*args, **kwargs)
        if spec.options.check == "always":
            check_return(spec, result)
        return result


def run_generator(
    spec: CallSpec,
    fn: Callable[..., Generator[Any, Any, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    *,
    mode: str = "ray",
    actor_id: str | None = None,
) -> Generator[Any, Any, Any]:
    """Run a generator function as one call that ends when the generator is exhausted."""
    with _Boundary(spec, owner, mode=mode, actor_id=actor_id):
        return (yield from fn(*args, **kwargs))


async def run_async(
    spec: CallSpec,
    fn: Callable[..., Coroutine[Any, Any, _T]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    *,
    mode: str = "ray",
    actor_id: str | None = None,
) -> _T:
    """Run a coroutine function as one call (each asyncio task has its own context)."""
    with _Boundary(spec, owner, mode=mode, actor_id=actor_id):
        result = await fn(*args, **kwargs)
        if spec.options.check == "always":
            check_return(spec, result)
        return result


async def run_async_generator(
    spec: CallSpec,
    fn: Callable[..., AsyncIterator[Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    *,
    mode: str = "ray",
    actor_id: str | None = None,
) -> AsyncIterator[Any]:
    """Run an async generator function as one call."""
    with _Boundary(spec, owner, mode=mode, actor_id=actor_id):
        async for item in fn(*args, **kwargs):
            yield item


def check_return(spec: CallSpec, value: Any) -> None:
    """``check="always"``: fail the call, in the worker, if Ray cannot send ``value`` back.

    Raises:
        NotSerializableError: With the report; ``ray.get`` raises it on the driver.
    """
    report = check_serializable(value, name=f"the return value of {spec.function}", scope="return")
    if not report.ok:
        reject(report, "returning from the call", spec.function)


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a function or class, as events report it."""
    return f"{obj.__module__}.{obj.__qualname__}"


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
    active = _events.CURRENT_CALL.get()
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

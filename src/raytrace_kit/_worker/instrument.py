"""Instrumenting user code: the function or class Ray ships, with the boundary baked in."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, TypeVar

from raytrace_kit import _ray_compat
from raytrace_kit._options import CallSpec, DebugOptions, qualified_name
from raytrace_kit._output.context import CURRENT_CALL, PARENT_KWARG
from raytrace_kit._output.frames import user_frames
from raytrace_kit._worker.boundary import run, run_async, run_async_generator, run_generator

__all__ = ["instrument_class", "instrument_function"]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])


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
            parent = kwargs.pop(PARENT_KWARG, None)
            try:
                return (yield from run_generator(spec, fn, args, kwargs, parent=parent))
            except BaseException as error:
                user_frames_first(error)
                raise

        return _accepting_parent(generator_task, fn)

    @functools.wraps(fn)
    def task(*args: Any, **kwargs: Any) -> Any:
        parent = kwargs.pop(PARENT_KWARG, None)
        try:
            return run(spec, fn, args, kwargs, parent=parent)
        except BaseException as error:
            user_frames_first(error)
            raise

    return _accepting_parent(task, fn)


def _accepting_parent(
    wrapper: _F, original: Callable[..., Any], *, method: bool = False, mark: str | None = None
) -> _F:
    """``wrapper`` with ``original``'s signature plus the parent keyword, as Ray checks it.

    Ray validates a call's arguments against the signature at ``.remote()``; the kit adds
    the submitting call's id as a keyword (:data:`PARENT_KWARG`) when there is one. For
    actor methods Ray reads the signature of ``inspect.unwrap(method)``: a method wrapper
    drops ``__wrapped__`` so that Ray reads this one (its other attributes, copied by
    ``functools.wraps``, stay). ``mark``, a method's qualified name when its calls are
    logged, is the keyword's default: it travels with every handle (in the method's
    signature), and tells the submitting process to keep a ``call.submit`` record.
    """
    if method:
        with contextlib.suppress(AttributeError):
            del wrapper.__wrapped__  # type: ignore[attr-defined]
    try:
        signature = inspect.signature(original)
    except (TypeError, ValueError):
        return wrapper  # no signature to extend: Ray checks nothing either
    parameters = list(signature.parameters.values())
    extra = inspect.Parameter(PARENT_KWARG, inspect.Parameter.KEYWORD_ONLY, default=mark)
    if any(p.name == PARENT_KWARG for p in parameters):
        return wrapper
    at = len(parameters)
    if parameters and parameters[-1].kind is inspect.Parameter.VAR_KEYWORD:
        at -= 1
    parameters.insert(at, extra)
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    return wrapper


def user_frames_first(error: BaseException) -> None:
    """Start ``error``'s traceback at the user's code, as plain Ray's starts.

    Ray prints a task's traceback from the first frame below its own; without this, the
    kit's wrapper and runner would be the first two. Called in the outermost wrapper,
    whose bare ``raise`` then keeps the edited traceback (Python 3.11+; 3.10 re-raises
    the one it caught, so the kit's frames show there). Only leading frames go.
    """
    tb = user_frames(error.__traceback__)
    if tb is not None:
        error.__traceback__ = tb


def _passes_through(bound: bool, owner: int | None) -> bool:
    """Whether a method call is part of the call already running here, not a new one.

    A method calling another of its own instance (``self.helper()``), or a static or class
    method called from inside any method of this actor, passes straight through.
    """
    active = CURRENT_CALL.get()
    if active is None:
        return False
    return active.owner == owner if bound else active.owner is not None


def _instrument_method(
    method: Callable[..., Any], spec: CallSpec, bound: bool
) -> Callable[..., Any]:
    """The instrumented version of one method, of the same kind (sync, async, generator).

    ``bound``: an instance method (``args[0]`` is the instance, whose ``id`` tells its
    calls apart); otherwise the function inside a ``staticmethod`` or ``classmethod``.
    """
    # These closures are pickled by value with the class: they may reference only
    # module-level names (pickled by reference), spec, method and bound.
    mark = spec.function if spec.options.log else None
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def async_method(*args: Any, **kwargs: Any) -> Any:
            parent = kwargs.pop(PARENT_KWARG, None)
            owner = id(args[0]) if bound else None
            try:
                if _passes_through(bound, owner):
                    return await method(*args, **kwargs)
                return await run_async(spec, method, args, kwargs, owner, parent=parent)
            except BaseException as error:
                user_frames_first(error)
                raise

        return _accepting_parent(async_method, method, method=True, mark=mark)
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def async_generator_method(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            parent = kwargs.pop(PARENT_KWARG, None)
            owner = id(args[0]) if bound else None
            if _passes_through(bound, owner):
                inner = method(*args, **kwargs)
            else:
                inner = run_async_generator(spec, method, args, kwargs, owner, parent=parent)
            try:
                async for item in inner:
                    yield item
            except BaseException as error:
                user_frames_first(error)
                raise

        return _accepting_parent(async_generator_method, method, method=True, mark=mark)
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generator_method(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
            parent = kwargs.pop(PARENT_KWARG, None)
            owner = id(args[0]) if bound else None
            try:
                if _passes_through(bound, owner):
                    return (yield from method(*args, **kwargs))
                return (yield from run_generator(spec, method, args, kwargs, owner, parent=parent))
            except BaseException as error:
                user_frames_first(error)
                raise

        return _accepting_parent(generator_method, method, method=True, mark=mark)

    @functools.wraps(method)
    def sync_method(*args: Any, **kwargs: Any) -> Any:
        parent = kwargs.pop(PARENT_KWARG, None)
        owner = id(args[0]) if bound else None
        try:
            if _passes_through(bound, owner):
                return method(*args, **kwargs)
            return run(spec, method, args, kwargs, owner, parent=parent)
        except BaseException as error:
            user_frames_first(error)
            raise

    return _accepting_parent(sync_method, method, method=True, mark=mark)


def _default_init(self: Any) -> None:
    """Stand-in ``__init__`` for classes without one, so actor creation is a call too."""


# Dunder methods a caller invokes through a handle; others (__repr__, __eq__, __getstate__
# ...) are protocol methods that Python and Ray call implicitly, left as they are.
_REMOTE_DUNDERS = frozenset({"__init__", "__call__"})


def _actor_methods(cls: type) -> dict[str, Any]:
    """The members of ``cls`` (own and inherited) that callers can invoke through a handle.

    Functions, ``staticmethod`` and ``classmethod`` objects, as found in the class dicts;
    a later definition (a subclass's property, say) replaces an earlier one.
    """
    methods: dict[str, Any] = {}
    for klass in reversed(cls.__mro__[:-1]):  # base classes first, object excluded
        for name, attr in vars(klass).items():
            remote = not name.startswith("__") or name in _REMOTE_DUNDERS
            if (remote and isinstance(attr, staticmethod | classmethod)) or (
                remote and inspect.isfunction(attr)
            ):
                methods[name] = attr
            else:
                methods.pop(name, None)
    return methods


def instrument_class(cls: type[_T], options: DebugOptions) -> type[_T]:
    """Return Ray's subclass of ``cls`` (as ``ray.remote`` makes it), its methods instrumented.

    Sync, ``async def``, generator and async generator methods keep their kind; static
    and class methods stay static and class methods; ``__call__`` is instrumented too.
    ``@ray.method(...)`` settings (copied with the function's ``__dict__``) keep working.
    The subclass keeps the name, qualified name, module and docs of ``cls``.
    """
    prefix = qualified_name(cls)
    namespace: dict[str, Any] = {}
    methods = _actor_methods(cls)
    if "__init__" not in methods:
        methods["__init__"] = _default_init
    for name, member in methods.items():
        kind = "actor_init" if name == "__init__" else "actor_method"
        spec = CallSpec(f"{prefix}.{name}", kind, options)
        if isinstance(member, staticmethod | classmethod):
            wrapped = _instrument_method(member.__func__, spec, bound=False)
            namespace[name] = type(member)(wrapped)
        else:
            namespace[name] = _instrument_method(member, spec, bound=True)
    instrumented = _ray_compat.actor_subclass(cls)
    for name, member in namespace.items():
        setattr(instrumented, name, member)
    instrumented.__qualname__ = cls.__qualname__  # as cloudpickle gives it in the worker
    instrumented.__doc__ = cls.__doc__
    return instrumented

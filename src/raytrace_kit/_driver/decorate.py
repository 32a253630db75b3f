"""``debuggable()``: turns a function, class, remote function or actor class into a proxy."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

import ray
from typing_extensions import ParamSpec, Unpack

from raytrace_kit import _ray_compat
from raytrace_kit._driver import data_hooks
from raytrace_kit._driver.actor_class import DebuggableActorClass
from raytrace_kit._driver.function import DebuggableFunction
from raytrace_kit._driver.proxy import Debuggable
from raytrace_kit._options import DebugOptions, KitOptions
from raytrace_kit.exceptions import InvalidTargetError

__all__ = ["debuggable"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")

_Decorated = DebuggableFunction[..., Any] | DebuggableActorClass[Any]


# A class is also a Callable; the class overload comes first so classes match it.
@overload
def debuggable(target: type[_T], /) -> DebuggableActorClass[_T]: ...  # type: ignore[overload-overlap]
@overload
def debuggable(target: Callable[_P, _R], /) -> DebuggableFunction[_P, _R]: ...
@overload
def debuggable(target: Any, /) -> _Decorated: ...
@overload
def debuggable(
    target: None = None, /, **options: Unpack[KitOptions]
) -> Callable[[Any], _Decorated]: ...


def debuggable(target: Any = None, /, **options: Any) -> Any:
    """Instrument a Ray remote function or actor class; every call of it is logged.

    Use it bare or with keywords, outermost, above ``@ray.remote``. Given a plain function
    or class it applies ``ray.remote`` itself.

    Every execution (a task, an actor's ``__init__``, each actor method call) writes a
    ``call.start`` and a ``call.end`` event, with the Ray ids, timing, status and memory
    figures, to the event file of the process that ran it, in that node's
    :func:`~raytrace_kit.log_dir`. Results, exceptions and retries are exactly those of
    plain Ray.

    Args:
        target: What to instrument: a function, a class, a ``@ray.remote`` function or a
            ``@ray.remote`` actor class. Omit it to get a decorator.
        **options: raytrace_kit options (all keyword-only, all optional):

            - ``log`` (bool, default ``True``): write ``call.start``/``call.end`` events.
            - ``log_args`` (bool, default ``False``): also write a short ``repr`` of each
              argument on ``call.start``, and of each local of a failed call's frames on
              its ``call.end``, values of secret-looking keys redacted.
            - ``local`` (bool or ``None``, default ``None``): ``True`` always runs the calls
              in this process (local mode), ``False`` never does, ``None`` follows
              :func:`local_mode`.
            - ``post_mortem`` (bool, default ``False``): open a debugger at the failing
              frame: pdb in local mode, Ray's post-mortem debugger on a cluster.
            - ``check`` (``"first"``, ``"always"``, ``"on_error"``, ``"off"``; default
              ``"first"``): serializability checks before submission: the code once,
              also every call's arguments and return values, only to explain a failure
              Ray reports, or none.
            - ``profile`` (``"memray"``, ``"cprofile"`` or ``None``): profile every
              execution in its worker, one file per call under ``log_dir()/"profiles"``.
            - ``profile_options`` (dict): the profiler's options: memray's
              ``native_traces``, ``trace_python_allocators``, ``follow_fork``,
              ``file_format``, ``memory_interval_ms``; cProfile's ``timeunit``,
              ``subcalls``, ``builtins``.
            - ``profile_scope`` (``"call"`` or ``"actor"``, default ``"call"``): one capture
              per call, or one per actor from ``__init__`` until it exits (leak hunting;
              actor classes only).
            - ``pin`` (``True``, a node id, or :class:`Pin`): ``True`` runs all calls of a
              function in one dedicated process; a node id runs every call (or the actor)
              on that node.
            - ``stuck_after`` (seconds, ``False`` or ``None``): a call running longer
              counts as stuck and leaves a ``call.stuck`` event with its stack and what
              it waits on; ``None`` takes ``RAYTRACE_STUCK_AFTER`` (else 60 s), ``False``
              turns it off.
            - ``sample`` (``True``, a rate in Hz from 1 to 1000, or ``None``): the sampling
              profiler, in each process that runs these calls: every thread's stack at
              that rate (``True``: 100 Hz), read with ``raytrace-kit profile``.
            - ``capture`` (``"failures"`` or ``None``, default ``None``): a failed call
              keeps its pickled arguments (and an actor's state) in a file only you can
              read, for :func:`replay` and ``raytrace-kit replay``.

    Returns:
        A :class:`DebuggableFunction` or :class:`DebuggableActorClass`, or, without
        ``target``, a decorator that returns one.

    Raises:
        InvalidTargetError: ``target`` is not something Ray can run remotely.
        InvalidOptionError: An unknown option, or a value of the wrong type.

    Example:
        >>> import ray
        >>> from raytrace_kit import debuggable
        >>> @debuggable(log=True)
        ... @ray.remote(num_cpus=1)
        ... def transform(batch):
        ...     return [x * 2 for x in batch]
    """
    kit_options = DebugOptions().replace(**options)  # validate at decoration time
    if target is None:

        def decorate(obj: Any) -> _Decorated:
            return _wrap(obj, kit_options, options)

        return decorate
    return _wrap(target, kit_options, options)


def _wrap(target: Any, options: DebugOptions, given: dict[str, Any]) -> _Decorated:
    data_hooks.install()  # a decorated UDF given to Ray Data is instrumented there too
    if isinstance(target, Debuggable):
        # Decorated twice: the options given here change those of the inner decorator.
        return cast("_Decorated", target.with_debug(**given))
    if isinstance(target, _ray_compat.RemoteFunction):
        return DebuggableFunction(target, _ray_compat.python_function_of(target), options)
    if isinstance(target, _ray_compat.ActorClass):
        return DebuggableActorClass(target, _ray_compat.python_class_of(target), options)
    if inspect.isclass(target):
        return DebuggableActorClass(_ray_compat.ray_remote(target), target, options)
    if inspect.iscoroutinefunction(target):
        msg = (
            f"@debuggable cannot make {target.__qualname__!r} a Ray task: 'async def' "
            "functions cannot be remote tasks in Ray. Wrap the body with "
            "asyncio.run(...) in a plain function, or make it a method of an actor class."
        )
        raise InvalidTargetError(msg)
    if inspect.isfunction(target):
        return DebuggableFunction(_ray_compat.ray_remote(target), target, options)
    raise InvalidTargetError(_describe_bad_target(target))


def _describe_bad_target(target: Any) -> str:
    kind = type(target).__name__
    if isinstance(target, ray.actor.ActorHandle):
        hint = "decorate the actor class, before calling .remote() on it"
    elif type(target).__name__ in {"FuncWrapper", "ActorOptionWrapper"}:
        hint = (
            "decorate the remote function or actor class itself and call .options(...) "
            "on the result: debuggable(f).options(num_cpus=2)"
        )
    elif isinstance(target, ray.actor.ActorMethod):
        hint = "decorate the whole actor class; every method is then instrumented"
    elif callable(target):
        hint = (
            "Ray runs only functions and classes remotely; wrap this callable in a "
            "plain 'def' and decorate that"
        )
    else:
        hint = "apply @debuggable to a function or class definition"
    return (
        f"@debuggable expects a function, a class, a @ray.remote function or a "
        f"@ray.remote actor class; got {target!r} (type {kind}). Fix: {hint}. "
        "Put @debuggable outermost, above @ray.remote."
    )

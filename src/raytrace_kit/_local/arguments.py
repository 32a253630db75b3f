"""A local call's arguments as Ray prepares them: refs resolved, values copied, signature checked.

Ray serializes a call's arguments at ``.remote()`` (so the caller's later mutations never
reach the call, and an unserializable argument fails there) and resolves refs passed as
top-level arguments before the call starts; local mode does the same, in this process.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from raytrace_kit._local import refs
from raytrace_kit._local.copies import copy_value
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import CallSpec

__all__ = [
    "RESOLVE_ONLY",
    "HeldArguments",
    "arity",
    "check_call",
    "copy_arguments",
    "is_generator",
    "prepare",
    "prepare_arguments",
]

RESOLVE_ONLY = LocalConfig(copy=False)  # arguments copied already: resolve refs only


def prepare_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], config: LocalConfig, function: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Resolve top-level refs and copy, as Ray does on submission.

    Raises:
        TypeError: An argument cannot be serialized (raised at ``.remote()``, as in Ray).
        RayTaskError: An argument is the ref of a failed call.
    """
    args = tuple(refs.resolve_argument(a) for a in args)
    if kwargs:
        kwargs = {k: refs.resolve_argument(v) for k, v in kwargs.items()}
    if not config.copy:
        return args, kwargs
    return copy_arguments(args, kwargs, function)


def copy_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], function: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Copy arguments as Ray serializes them at submission: each apart (refs stay refs).

    One list passed as two arguments reaches the call as two lists, as in Ray, which
    serializes each argument on its own.

    Raises:
        TypeError: An argument cannot be serialized, with Ray's wording of it.
    """
    try:
        copied = tuple(map(copy_value, args))
        if kwargs:
            kwargs = {key: copy_value(value) for key, value in kwargs.items()}
    except Exception as exc:
        bad = next((a for a in (*args, *kwargs.values()) if not _copyable(a)), None)
        msg = (
            f"Could not serialize the argument {bad!r} for a task or actor {function} "
            f"(local mode copies arguments as Ray serializes them): {exc}"
        )
        raise TypeError(msg) from exc
    return copied, kwargs


def _copyable(value: Any) -> bool:
    try:
        copy_value(value)
    except Exception:
        return False
    return True


def prepare(
    spec: CallSpec,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    config: LocalConfig,
    instance: Any,
) -> tuple[tuple[Any, ...], dict[str, Any], int | None]:
    """Arguments as the call receives them, and the owner (the actor instance's id).

    Raises:
        RayTaskError: A dependency failed.
        TypeError: An argument cannot be serialized.
    """
    args, kwargs = prepare_arguments(args, kwargs, config, spec.function)
    if instance is None:
        return args, kwargs, None
    return (instance, *args), kwargs, id(instance)  # the actor itself is never copied


class HeldArguments:
    """A call's arguments as Ray holds them once ``.remote()`` returned: copied then.

    An async actor's call starts later; a caller's mutation in between must not reach it,
    and an argument Ray could not serialize must fail at ``.remote()``.

    Raises:
        TypeError: An argument cannot be serialized (from the constructor).
    """

    __slots__ = ("_copy", "_held", "_name")

    def __init__(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], config: LocalConfig, function: str
    ) -> None:
        self._copy, self._name = config.copy, function
        # A copy now: Ray's TypeError at .remote(), and the caller's later mutations stay
        # the caller's. Each attempt then gets a copy of this one.
        self._held = copy_arguments(args, kwargs, function) if config.copy else (args, kwargs)

    def arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A fresh copy of the arguments (refs stay refs), or the objects with copy=False."""
        if not self._copy:
            return self._held
        return copy_arguments(*self._held, self._name)


def arity(signature: inspect.Signature) -> tuple[int, int] | None:
    """``(fewest, most)`` positional arguments, when positional calls need no binding.

    ``None`` when ``inspect`` must bind the call (``*args``, keyword-only parameters).
    """
    kinds = {parameter.kind for parameter in signature.parameters.values()}
    if not kinds <= {inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD}:
        return None
    parameters = list(signature.parameters.values())
    required = sum(1 for p in parameters if p.default is inspect.Parameter.empty)
    return required, len(parameters)


def check_call(
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    shape: tuple[int, int] | None = None,
) -> None:
    """Arguments that do not fit raise ``TypeError`` at ``.remote()``, as Ray raises it.

    ``shape`` (from :func:`arity`) answers the common positional call without binding.

    Raises:
        TypeError: With :mod:`inspect`'s message, which is Ray's.
    """
    if shape is not None and not kwargs and shape[0] <= len(args) <= shape[1]:
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(str(exc)) from None


def is_generator(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is a generator function, sync or async."""
    return inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)

"""Running one local call: arguments prepared as Ray would, the boundary, refs of the outcome.

Arguments and results go through Ray's serializer (a copy, unless ``copy=False``), refs
passed as top-level arguments are resolved, and failures surface at ``ray.get`` as the
``RayTaskError`` Ray would raise.
"""

from __future__ import annotations

import contextvars
import inspect
import pdb
from collections.abc import Callable, Generator
from typing import Any

from ray.exceptions import RayTaskError, WorkerCrashedError

from raytrace_kit import _ray_compat
from raytrace_kit._local import refs, setting
from raytrace_kit._local.copies import is_atom
from raytrace_kit._local.refs import LocalRef
from raytrace_kit._local.retry import NO_RETRY, Retry
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import CallSpec
from raytrace_kit._worker import boundary as boundary_runners
from raytrace_kit._worker.boundary import Boundary

__all__ = [
    "NO_RETRY",
    "RESOLVE_ONLY",
    "Outcome",
    "Retry",
    "arity",
    "check_call",
    "copy_arguments",
    "execute_call",
    "failed_refs",
    "is_generator",
    "lazy_generator",
    "package",
    "prepare",
    "prepare_arguments",
    "run",
]


RESOLVE_ONLY = LocalConfig(copy=False)  # arguments copied already: resolve refs only


class Outcome:
    """What a local call produced: a value (or generator items) and/or an exception."""

    __slots__ = ("error", "items", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.items: list[Any] | None = None
        self.error: BaseException | None = None


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
    """Copy arguments as Ray serializes them at submission (refs stay refs).

    Raises:
        TypeError: An argument cannot be serialized, with Ray's wording of it.
    """
    if all(map(is_atom, args)) and all(map(is_atom, kwargs.values())):
        return args, kwargs  # nothing to copy: immutable values are their own copies
    try:
        return refs.copy_value((args, kwargs))  # type: ignore[no-any-return]
    except Exception as exc:
        bad = next((a for a in (*args, *kwargs.values()) if not _copyable(a)), None)
        msg = (
            f"Could not serialize the argument {bad!r} for a task or actor {function} "
            f"(local mode copies arguments as Ray serializes them): {exc}"
        )
        raise TypeError(msg) from exc


def _copyable(value: Any) -> bool:
    try:
        refs.copy_value(value)
    except Exception:
        return False
    return True


def execute_call(
    spec: CallSpec,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    config: LocalConfig,
    *,
    owner: int | None = None,
    actor_id: str | None = None,
    generator: bool = False,
    attempt: int = 0,
    retry: Retry | None = None,
) -> Outcome:
    """Run one call in this thread, inside the instrumentation boundary."""
    outcome = Outcome()
    token = setting.OVERRIDE.set(config)  # calls made from inside run locally too
    try:
        boundary = Boundary(
            spec,
            owner,
            mode="local",
            actor_id=actor_id,
            attempt=attempt,
            arguments=(args, kwargs, fn),
        )
        with boundary:
            tracker = boundary.tracker
            if tracker is not None:
                try:
                    tracker.__enter__()  # here, so memray records the frames below
                except Exception as exc:
                    boundary.not_tracked(exc)
                    tracker = None
            try:
                _call_into(outcome, fn, args, kwargs, generator)
            finally:
                if tracker is not None:
                    boundary.untrack(tracker)
    except Exception as exc:
        outcome.error = exc
        retried = retry is not None and retry.again(exc, attempt)  # post-mortem on the last
        if (config.post_mortem or spec.options.post_mortem) and not retried:
            pdb.post_mortem(exc.__traceback__)
    except SystemExit:
        if actor_id is not None:
            raise  # an actor's exit: its actor decides (see actor.ActorExit)
        # sys.exit() in a task ends its worker in Ray: WorkerCrashedError, after Ray's
        # retries of system failures. It never reaches the caller's process.
        outcome.error = WorkerCrashedError()
    finally:
        setting.OVERRIDE.reset(token)
    return outcome


def _call_into(
    outcome: Outcome,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    generator: bool,
) -> None:
    result = fn(*args, **kwargs)
    if generator and inspect.isgenerator(result):
        outcome.items = []
        for item in result:  # run to completion: calls are synchronous
            outcome.items.append(item)
    else:
        outcome.value = result


def package(outcome: Outcome, num_returns: Any, copy: bool, function: str) -> Any:
    """Turn an outcome into what ``.remote()`` returns in Ray for these ``num_returns``."""
    if outcome.items is not None and num_returns in (None, "streaming"):
        made = [refs.value_ref(item, copy, function) for item in outcome.items]
        if outcome.error is not None:
            made.append(refs.error_ref(outcome.error, function))
        return refs.LocalRefGenerator(made)
    if num_returns == "dynamic":
        if outcome.error is not None:
            return refs.error_ref(outcome.error, function)
        produced = outcome.items if outcome.items is not None else list(outcome.value)
        inner = _ray_compat.DynamicObjectRefGenerator(
            [refs.value_ref(v, copy, function) for v in produced]
        )
        return refs.value_ref(inner, False, function)
    count = 1 if num_returns is None else int(num_returns)
    error = outcome.error
    value = outcome.items if outcome.items is not None else outcome.value
    values: list[Any] = [value]
    if error is None and count != 1:
        values = list(value) if count else []
        if len(values) != count:
            error = ValueError(f"Task returned {len(values)} objects, but num_returns={count}.")
    if count == 0:
        return None
    if error is not None:
        made = [refs.error_ref(error, function) for _ in range(count)]
    else:
        made = [refs.value_ref(v, copy, function) for v in values]
    return made[0] if count == 1 else made


def failed_refs(error: RayTaskError, num_returns: Any, function: str) -> Any:
    """What a call whose dependency failed returns: that error, in each of its refs."""
    ref = refs.error_ref(error, function)
    count = 1 if num_returns in (None, "streaming", "dynamic") else int(num_returns)
    return ref if count == 1 else [ref] * count


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


def run(
    spec: CallSpec,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    config: LocalConfig,
    num_returns: Any,
    instance: Any = None,
    actor_id: str | None = None,
    generator: bool,
    retry: Retry | None = None,
) -> Any:
    """Run one call now, in this thread; what ``.remote()`` returns.

    A generator called for streaming (the default ``num_returns``) runs as its caller
    iterates: see :func:`lazy_generator`.
    """
    retry = retry or NO_RETRY
    submitted = (args, kwargs)  # the caller's: untouched by an attempt, which gets copies
    try:
        args, kwargs, owner = prepare(spec, args, kwargs, config, instance)
    except RayTaskError as failed_dependency:
        return failed_refs(failed_dependency, num_returns, spec.function)
    if generator and num_returns in (None, "streaming") and inspect.isgeneratorfunction(fn):
        return lazy_generator(spec, fn, args, kwargs, config, owner=owner, actor_id=actor_id)
    with retry.environment():
        attempt = 0
        while True:
            if attempt:  # arguments of its own, as Ray deserializes them anew for a retry
                args, kwargs, owner = prepare(spec, *submitted, config, instance)
            outcome = execute_call(
                spec,
                fn,
                args,
                kwargs,
                config,
                owner=owner,
                actor_id=actor_id,
                generator=generator,
                attempt=attempt,
                retry=retry,
            )
            if outcome.error is None or not retry.again(outcome.error, attempt):
                break
            attempt += 1
    if isinstance(outcome.error, RayTaskError):
        return failed_refs(outcome.error, num_returns, spec.function)
    return package(outcome, num_returns, config.copy, spec.function)


def lazy_generator(
    spec: CallSpec,
    fn: Callable[..., Generator[Any, Any, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    config: LocalConfig,
    *,
    owner: int | None,
    actor_id: str | None,
    before_step: Callable[[], LocalRef | None] | None = None,
) -> refs.LocalRefGenerator:
    """A streaming generator call that runs as the caller iterates, in the caller's thread.

    Each ``next()`` runs the generator to its next ``yield`` inside the call's own context
    (the boundary, local mode), so code between two ``next()`` calls is not part of the
    call. The call starts (``call.start``) at the first ``next()`` and ends when the
    generator does. ``before_step`` may end it first (its actor died).
    """
    context = contextvars.copy_context()
    function = spec.function
    running: list[Generator[Any, Any, Any]] = []
    finished = [False]

    def start() -> Generator[Any, Any, Any]:
        setting.OVERRIDE.set(config)
        return boundary_runners.run_generator(
            spec, fn, args, kwargs, owner, mode="local", actor_id=actor_id
        )

    def step() -> LocalRef:
        if finished[0]:
            raise StopIteration
        if before_step is not None and (ended := before_step()) is not None:
            finished[0] = True
            return ended
        if not running:
            running.append(context.run(start))
        try:
            item = context.run(next, running[0])
        except StopIteration:
            finished[0] = True
            raise
        except Exception as exc:
            finished[0] = True
            if config.post_mortem or spec.options.post_mortem:
                pdb.post_mortem(exc.__traceback__)
            return refs.error_ref(exc, function)
        return refs.value_ref(item, config.copy, function)

    return refs.LocalRefGenerator(step)


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
    """Whether ``fn`` (or the async method it runs) is a generator function."""
    original = getattr(fn, "__raytrace_method__", fn)
    return inspect.isgeneratorfunction(original) or inspect.isasyncgenfunction(original)

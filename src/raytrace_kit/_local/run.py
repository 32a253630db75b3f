"""Running one local call in this thread: its attempts inside the boundary, refs of the outcome.

Arguments are prepared as Ray would (:mod:`.arguments`), failures surface at ``ray.get``
as the ``RayTaskError`` Ray would raise (:mod:`.outcome`), and a streaming generator runs
as its caller iterates.
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable, Generator
from typing import Any

from ray.exceptions import RayTaskError, WorkerCrashedError

from raytrace_kit._local import refs, setting
from raytrace_kit._local.arguments import prepare
from raytrace_kit._local.call import Attempts, failed, post_mortem
from raytrace_kit._local.outcome import Outcome, failed_refs, package
from raytrace_kit._local.refs import LocalRef
from raytrace_kit._local.retry import NO_RETRY, Retry
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import CallSpec
from raytrace_kit._worker import boundary as boundary_runners
from raytrace_kit._worker.boundary import Boundary

__all__ = ["execute_call", "lazy_generator", "run"]


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
    attempts: Attempts | None = None,
) -> Outcome:
    """Run one attempt of a call in this thread, inside the boundary (a sync call's runner).

    ``attempts``: the call's, which keep its task id from one attempt to the next.
    """
    outcome = Outcome()
    token = setting.OVERRIDE.set(config)  # calls made from inside run locally too
    try:
        boundary = Boundary(
            spec, fn, args, kwargs, owner, "local", actor_id, None, attempt, same_task=attempts
        )
        with boundary:
            if (tracker := boundary.tracker) is not None:
                try:
                    tracker.__enter__()  # in this frame, as the boundary's runners do
                except Exception as exc:
                    tracker = boundary.not_tracked(exc)
            try:
                _call_into(outcome, fn, args, kwargs, generator)
            finally:
                if tracker is not None:
                    boundary.untrack(tracker)
    except Exception as exc:
        failed(outcome, exc, spec, config, retry, attempt)
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
    task_name: str | None = None,
) -> Any:
    """Run one call now, in this thread; what ``.remote()`` returns.

    ``task_name``: ``.options(name=...)``, the name Ray would give the task.

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
    attempts = Attempts(retry)
    attempts.task_name = task_name
    with retry.environment():
        while True:
            outcome = execute_call(
                spec,
                fn,
                args,
                kwargs,
                config,
                owner=owner,
                actor_id=actor_id,
                generator=generator,
                attempt=attempts.number,
                retry=retry,
                attempts=attempts,
            )
            if not attempts.again(outcome):
                break
            # Arguments of its own, as Ray deserializes them anew for a retry.
            args, kwargs, owner = prepare(spec, *submitted, config, instance)
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
        return boundary_runners.run_generator(spec, fn, args, kwargs, owner, "local", actor_id)

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
            post_mortem(spec, config, exc)
            return refs.error_ref(exc, function)
        return refs.value_ref(item, config.copy, function)

    return refs.LocalRefGenerator(step)

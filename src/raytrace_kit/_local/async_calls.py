"""Calls of local async actors, on the actor's loop (see :mod:`.actor_loop`).

Each call is a task on the loop: it waits for its pending arguments, as Ray waits for a
call's dependencies, then runs inside the boundary; coroutine methods are awaited, sync
methods block the loop as they do in Ray. Streaming generators run as their caller
iterates, driven by one task so that the call keeps one context.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

from ray import TaskID
from ray.exceptions import RayTaskError, TaskCancelledError

from raytrace_kit._local import refs, setting
from raytrace_kit._local.actor_loop import ActorLoop
from raytrace_kit._local.arguments import RESOLVE_ONLY, HeldArguments, prepare
from raytrace_kit._local.call import Attempts, failed, post_mortem
from raytrace_kit._local.outcome import Outcome, failed_refs, package
from raytrace_kit._local.refs import LocalRef
from raytrace_kit._local.retry import NO_RETRY, Retry
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import CallSpec
from raytrace_kit._worker import boundary as boundary_runners
from raytrace_kit._worker.boundary import Boundary

__all__ = ["LoopGenerator", "execute_async_call", "run_async_method"]


async def _dependencies(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Wait for pending refs among the arguments, as Ray waits before starting a call."""
    for arg in (*args, *kwargs.values()):
        if type(arg) is LocalRef and not arg.local_ready():
            with contextlib.suppress(Exception):
                await arg  # a failure surfaces when the arguments are prepared


async def execute_async_call(
    spec: CallSpec,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    config: LocalConfig,
    *,
    owner: int | None,
    actor_id: str | None,
    attempt: int = 0,
    retry: Retry | None = None,
    attempts: Attempts | None = None,
) -> Outcome:
    """Run one attempt on the actor's loop: awaited if a coroutine, else called (its runner)."""
    outcome = Outcome()
    setting.OVERRIDE.set(config)  # this task's own context
    boundary = Boundary(
        spec, fn, args, kwargs, owner, "local", actor_id, None, attempt,
        cpu=False, same_task=attempts,
    )  # fmt: skip
    try:
        with boundary:
            if boundary.call is not None:  # where its frames are while it awaits (watch)
                boundary.call.task = asyncio.current_task()
            if (tracker := boundary.tracker) is not None:
                try:
                    tracker.__enter__()  # in this frame, as the boundary's runners do
                except Exception as exc:
                    tracker = boundary.not_tracked(exc)
            try:
                result = fn(*args, **kwargs)
                if inspect.isawaitable(result):
                    result = await result
                elif inspect.isasyncgen(result):  # num_returns=N: all its items, here
                    outcome.items = [item async for item in result]
                elif inspect.isgenerator(result):
                    outcome.items = list(result)
                outcome.value = result
            finally:
                if tracker is not None:
                    boundary.untrack(tracker)
    except asyncio.CancelledError:
        # ray.cancel (or ray.kill) of a running call: Ray's TaskCancelledError, naming it,
        # raised from the call's code, so as Ray delivers it: RayTaskError(TaskCancelledError).
        call = getattr(boundary, "call", None)
        task_id = None if call is None else call.task_id
        cancelled = TaskCancelledError(None if task_id is None else TaskID.from_hex(task_id))
        outcome.error = refs.task_error(cancelled, spec.function)
    except Exception as exc:
        failed(outcome, exc, spec, config, retry, attempt)
    return outcome


async def run_async_method(
    spec: CallSpec,
    fn: Callable[..., Any],
    submitted: HeldArguments,
    *,
    config: LocalConfig,
    num_returns: Any,
    instance: Any,
    actor_id: str | None,
    retry: Retry | None = None,
    task_name: str | None = None,
) -> Any:
    """One call of an async actor, as a task on its loop; what its refs resolve to."""
    retry = retry or NO_RETRY
    attempts = Attempts(retry)
    attempts.task_name = task_name  # .options(name=...)
    while True:
        args, kwargs = submitted.arguments()  # each attempt its own, as Ray's retries
        await _dependencies(args, kwargs)
        try:
            args, kwargs, owner = prepare(spec, args, kwargs, RESOLVE_ONLY, instance)
        except RayTaskError as failed_dependency:
            return failed_refs(failed_dependency, num_returns, spec.function)
        outcome = await execute_async_call(
            spec,
            fn,
            args,
            kwargs,
            config,
            owner=owner,
            actor_id=actor_id,
            attempt=attempts.number,
            retry=retry,
            attempts=attempts,
        )
        if not attempts.again(outcome):
            break
    if isinstance(outcome.error, RayTaskError):
        return failed_refs(outcome.error, num_returns, spec.function)
    return package(outcome, num_returns, config.copy, spec.function)


class LoopGenerator:
    """A streaming generator call of an async actor, run on the actor's loop as iterated.

    One task on the loop drives the generator (async, or sync as Ray runs it there), so
    the whole call shares one context; each ``next()`` asks it for one more item.
    """

    def __init__(
        self,
        actor_loop: ActorLoop,
        spec: CallSpec,
        fn: Callable[..., Any],
        submitted: HeldArguments,
        *,
        config: LocalConfig,
        instance: Any,
        actor_id: str | None,
        on_exit: Callable[[BaseException | None], LocalRef],
    ) -> None:
        self._actor_loop = actor_loop
        self._call = (spec, fn, submitted, config, instance, actor_id)
        self._on_exit = on_exit  # the actor's answer when it exits or dies mid-stream
        self._waiting: deque[concurrent.futures.Future[LocalRef | None]] = deque()
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._finished = False
        self._final: LocalRef | None = None  # the one ref left to give: the actor died

    def _request(self) -> concurrent.futures.Future[LocalRef | None]:
        reply: concurrent.futures.Future[LocalRef | None] = concurrent.futures.Future()
        if self._finished:
            reply.set_result(self._take_final())
            return reply
        if self._loop is None:
            self._actor_loop.submit(self._drive)
            self._loop = self._actor_loop.loop
        self._loop.call_soon_threadsafe(self._deliver, reply)
        return reply

    def _deliver(self, reply: concurrent.futures.Future[LocalRef | None]) -> None:
        if self._finished:
            reply.set_result(self._take_final())
            return
        self._waiting.append(reply)
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()

    async def _next_request(self) -> concurrent.futures.Future[LocalRef | None]:
        while not self._waiting:
            if self._wake is None:
                self._wake = asyncio.Event()
            self._wake.clear()
            await self._wake.wait()
        return self._waiting.popleft()

    def _take_final(self) -> LocalRef | None:
        final, self._final = self._final, None
        return final

    def _end(self) -> None:
        self._finished = True
        while self._waiting:
            self._waiting.popleft().set_result(self._take_final())

    async def _drive(self) -> None:
        spec, fn, submitted, config, instance, actor_id = self._call
        function = spec.function
        reply = await self._next_request()
        args, kwargs = submitted.arguments()
        try:
            await _dependencies(args, kwargs)
            args, kwargs, owner = prepare(spec, args, kwargs, RESOLVE_ONLY, instance)
        except RayTaskError as failed_dependency:
            reply.set_result(refs.error_ref(failed_dependency, function))
            self._end()
            return
        except asyncio.CancelledError:  # killed before it started
            reply.set_result(self._on_exit(None))
            self._end()
            return
        setting.OVERRIDE.set(config)
        if inspect.isasyncgenfunction(fn):
            items: Any = boundary_runners.run_async_generator(
                spec, fn, args, kwargs, owner, "local", actor_id
            )
        else:
            items = _as_async(
                boundary_runners.run_generator(spec, fn, args, kwargs, owner, "local", actor_id)
            )
        try:
            while True:
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    reply.set_result(None)
                    return
                except Exception as exc:
                    post_mortem(spec, config, exc)
                    reply.set_result(refs.error_ref(exc, function))
                    return
                except (asyncio.CancelledError, SystemExit) as ended:
                    # Killed (cancelled), or exit_actor()/sys.exit() inside: the actor
                    # is dead, and the next ref says so, as in Ray.
                    reply.set_result(self._on_exit(ended))
                    return
                reply.set_result(refs.value_ref(item, config.copy, function))
                try:
                    reply = await self._next_request()
                except asyncio.CancelledError:  # killed between two items
                    self._final = self._on_exit(None)  # the next one asked for says so
                    return
        finally:
            # Closed here, not left to the loop's end: a generator left suspended when
            # the loop closes is destroyed pending (and Python 3.13 warns of its aclose).
            await items.aclose()
            self._end()

    def step(self) -> LocalRef:
        """The next ref, for a caller in another thread (raises StopIteration at the end)."""
        ref = self._request().result()
        if ref is None:
            raise StopIteration
        return ref

    async def asynchronous(self) -> LocalRef | None:
        """The next ref, for a caller in any event loop (``None`` at the end)."""
        return await asyncio.wrap_future(self._request())

    def generator(self) -> refs.LocalRefGenerator:
        """The ``ObjectRefGenerator`` the caller iterates."""
        return refs.LocalRefGenerator(_Step(self))


class _Step:
    """``LoopGenerator``'s step as :class:`~.refs.LocalRefGenerator` calls it."""

    __slots__ = ("_owner", "asynchronous")

    def __init__(self, owner: LoopGenerator) -> None:
        self._owner = owner
        self.asynchronous = owner.asynchronous

    def __call__(self) -> LocalRef:
        return self._owner.step()


async def _as_async(items: Generator[Any, Any, Any]) -> Any:
    """A sync generator driven from the loop, blocking it at each step as Ray does."""
    try:
        for item in items:
            yield item
    finally:
        items.close()  # closed with this one (the actor killed midway): the call ends now

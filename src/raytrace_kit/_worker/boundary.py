"""The one error boundary around each call, in the process that runs it.

Entering a :class:`Boundary` makes the call current and writes ``call.start``; leaving it
writes ``call.end`` with the outcome and memory figures. Instrumentation failures are
caught here and reported; the user's call runs and its result or exception passes
through untouched. Sync, generator, async and async-generator calls each have a runner.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import AsyncIterator, Callable, Generator
from typing import TYPE_CHECKING, Any, TypeVar

from raytrace_kit import _process, _registry
from raytrace_kit._options import CallSpec
from raytrace_kit._output import call_lines, encode, writer
from raytrace_kit._output.context import CURRENT_CALL, ActiveCall, parent_token
from raytrace_kit._worker import on_demand, parents, watch
from raytrace_kit._worker import state as worker_state

if TYPE_CHECKING:
    from raytrace_kit._worker.profilers import CallProfile

__all__ = ["Boundary", "run", "run_async", "run_async_generator", "run_generator"]

_T = TypeVar("_T")


class Boundary:
    """The one error boundary around a call, usable in sync, generator and async code.

    Entering captures the call and makes it current; leaving records how it ended and
    restores the previous context. It never suppresses the user's exception.
    """

    __slots__ = (
        "actor_id",
        "arguments",
        "attempt",
        "call",
        "cpu",
        "cpu_started",
        "end_tail",
        "inputs",
        "mode",
        "owner",
        "parent",
        "profile",
        "same_task",
        "spec",
        "token",
        "tracker",
    )

    profile: CallProfile | None

    def __init__(  # noqa: PLR0917 -- positional: one line at each of its six call sites
        self,
        spec: CallSpec,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        owner: int | None = None,
        mode: str = "ray",
        actor_id: str | None = None,
        parent: str | None = None,
        attempt: int = 0,
        *,
        cpu: bool = True,
        same_task: Any = None,
    ) -> None:
        self.parent = parent
        self.same_task = same_task  # local mode: the call's Attempts (one task id for all)
        self.arguments = _shown(args, kwargs, fn, owner) if spec.options.log_args else None
        self.inputs = (fn, args, kwargs, owner) if spec.options.capture else None  # for replay
        self.spec = spec
        self.owner = owner
        self.mode = mode
        self.actor_id = actor_id
        self.attempt = attempt  # local mode's own retries; Ray's come from Ray
        # The CPU clocks at the start, for calls that hold one thread from start to end;
        # None for async calls and generators, whose thread runs other code in between.
        # Both clocks: the thread's, and the process's (all threads: a library's own too).
        self.cpu_started: tuple[float, float | None] | None = None
        self.cpu = cpu
        self.end_tail = ""  # members the runner adds to call.end (a Ray Data batch's sizes)

    def __enter__(self) -> None:
        """Begin the call; :attr:`tracker` is memray's tracker to enter around the user's code.

        Each runner enters the tracker itself, with ``tracker.__enter__()`` in the frame that
        calls the user's function (a C call, no Python frame between): memray records no
        frame that was on the stack when tracking started and has returned since, so a
        tracker entered in a helper would record empty stacks.
        """
        spec, mode = self.spec, self.mode
        try:
            parent = self.parent
            if parent is None and mode == "local":  # submitted synchronously from its parent
                parent = parent_token(CURRENT_CALL.get())
            call = ActiveCall(
                spec.fields, spec.fragment, mode, self.owner, self.actor_id, self.attempt, parent,
                self.same_task,
            )  # fmt: skip
            if spec.options.log:
                call.capture()
                # The clocks its function's last call here was long enough for (_process.ran).
                known, fragment = _process.state, spec.fragment
                cpu = self.cpu and fragment not in known.tiny_calls
                short = cpu and fragment not in known.short_calls
                rss, private, max_rss, thread, process = _process.start_figures(
                    call.started, process_cpu=short, thread_cpu=cpu
                )
                call.rss_start = rss
                if cpu:
                    self.cpu_started = (thread, process)
                # log_args=True: the user asked for them
                tail = "" if self.arguments is None else encode.args_members(*self.arguments)
                line = call_lines.start_line(call.fragment, rss, private, max_rss, tail)
                writer.emit_line(line, call.identity)
        except Exception as exc:
            writer.report_failure("begin-call", "cannot instrument the call", exc)
            call = None
        self.call = call
        self.token = CURRENT_CALL.set(call)
        self.profile = self.tracker = None
        if call is None:
            return
        state = worker_state.state
        watch_after = call.watch = spec.watch
        state.running_calls[id(call)] = call
        if state.kit_thread is None:
            watch.start()  # once per process: stacks, stuck calls, submissions; never raises
        if spec.options.sample is not None and state.sampler is None:
            on_demand.start_sampler(spec.options.sample)  # once per process; never raises
        if watch_after and watch_after < 4 * state.watch_period:
            watch.shorten(watch_after)
        if self.mode != "local" and (
            not state.parents_hooked
            or (spec.options.program is not None and not state.program_installed)
        ):
            _hook_process(spec)
        if spec.options.profile is not None:
            try:
                self.profile = on_demand.start_profile(spec, call)
            except Exception as exc:
                writer.report_failure("profile", "cannot start the profiler", exc)
                return
            self.tracker = None if self.profile is None else self.profile.tracker

    def not_tracked(self, exc: BaseException) -> Any:
        """Memray's tracker could not start: the call runs unprofiled, and says why.

        Returns:
            ``None``, the tracker the runner then has.
        """
        profile, self.profile = self.profile, None
        if profile is not None:
            profile.abandon(exc)
        return None

    def returned(self, result: _T) -> _T:
        """The call's result, checked first when ``check="always"`` asks for it."""
        if self.spec.options.check == "always":
            on_demand.check_return(self.spec, result)
        return result

    def untrack(self, tracker: Any) -> None:
        """Stop the memray tracker entered around the user's code; never raises."""
        try:
            tracker.__exit__(None, None, None)
        except Exception as exc:
            writer.report_failure("profile-stop", "cannot stop the memory profiler", exc)

    def __exit__(self, _type: object, exc: BaseException | None, _tb: object) -> None:
        # A generator resumed from another context cannot reset there: the var belongs
        # to that context and is discarded with it.
        try:  # noqa: SIM105 -- contextlib.suppress costs two Python calls per call
            CURRENT_CALL.reset(self.token)
        except (ValueError, RuntimeError):
            pass
        call = self.call
        if call is not None:
            worker_state.state.running_calls.pop(id(call), None)
            # Its retry is the next attempt; not a Ray Data batch's (its task runs many).
            if exc is not None and self.mode != "local" and self.spec.operator is None:
                _process.failed_here(call.task_id, call.attempt)
        tail = ""
        if self.profile is not None:
            try:
                tail = self.profile.finish(exc)
            except Exception as error:
                writer.report_failure("profile-end", "cannot finish the profile", error)
        if call is None or not self.spec.options.log:
            return
        try:
            started = self.cpu_started
            process_started = None if started is None else started[1]
            duration = time.perf_counter() - call.started
            rss, private, max_rss, thread, process = _process.end_figures(
                process_cpu=process_started is not None,
                usage=started is not None or duration >= _process.THREAD_CPU_MIN_S,
            )
            cpu_s = process_cpu_s = None
            if started is not None:
                cpu_s = thread - started[0]
                if process is not None and process_started is not None:
                    process_cpu_s = process - process_started
            if self.cpu:
                _process.ran(self.spec.fragment, duration)
            if exc is not None:  # its locals (and replay file) come first
                tail = on_demand.failed(call, self.spec, self.inputs, exc) + tail
            figures = (rss, private, max_rss)
            tail += self.end_tail
            line = call_lines.end_line(
                call.fragment, duration, exc, cpu_s, process_cpu_s, figures, call.rss_start, tail
            )
            writer.emit_line(line, call.identity)
        except Exception as error:
            writer.report_failure("end-call", "cannot record the end of the call", error)


# The runners: one per kind of call, each only what its kind needs. ``tracker.__enter__()``
# stands in each, in the frame that calls the user's function: see Boundary.__enter__.


def run(  # noqa: PLR0917 -- the boundary's own parameters, passed through
    spec: CallSpec,
    fn: Callable[..., _T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    mode: str = "ray",
    actor_id: str | None = None,
    parent: str | None = None,
    attempt: int = 0,
) -> _T:
    """Run ``fn(*args, **kwargs)`` as one instrumented call.

    ``mode`` is ``ray`` in a Ray worker (ids come from Ray) or ``local`` in local mode
    (no Ray task; ``actor_id`` is the local actor's id, if any).
    """
    boundary = Boundary(spec, fn, args, kwargs, owner, mode, actor_id, parent, attempt)
    with boundary:
        if (tracker := boundary.tracker) is not None:
            try:
                tracker.__enter__()
            except Exception as exc:
                tracker = boundary.not_tracked(exc)  # None: the call runs unprofiled
        try:
            result = fn(*args, **kwargs)
        finally:
            if tracker is not None:
                boundary.untrack(tracker)
        return boundary.returned(result)


def run_generator(  # noqa: PLR0917 -- as run()
    spec: CallSpec,
    fn: Callable[..., Generator[Any, Any, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    mode: str = "ray",
    actor_id: str | None = None,
    parent: str | None = None,
    attempt: int = 0,
) -> Generator[Any, Any, Any]:
    """Run a generator function as one call that ends when the generator is exhausted."""
    boundary = Boundary(spec, fn, args, kwargs, owner, mode, actor_id, parent, attempt, cpu=False)
    with boundary:
        if (tracker := boundary.tracker) is not None:
            try:
                tracker.__enter__()
            except Exception as exc:
                tracker = boundary.not_tracked(exc)  # None: the call runs unprofiled
        try:
            return (yield from fn(*args, **kwargs))
        finally:
            if tracker is not None:
                boundary.untrack(tracker)


async def run_async(  # noqa: PLR0917 -- as run()
    spec: CallSpec,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    mode: str = "ray",
    actor_id: str | None = None,
    parent: str | None = None,
    attempt: int = 0,
) -> Any:
    """Run a coroutine function as one call (each asyncio task has its own context)."""
    boundary = Boundary(spec, fn, args, kwargs, owner, mode, actor_id, parent, attempt, cpu=False)
    with boundary:
        if boundary.call is not None:  # where its frames are while it awaits (see .waits)
            boundary.call.task = asyncio.current_task()
            on_demand.loop_started(boundary.call)  # its loop watched: a turn held is named
        if (tracker := boundary.tracker) is not None:
            try:
                tracker.__enter__()
            except Exception as exc:
                tracker = boundary.not_tracked(exc)  # None: the call runs unprofiled
        try:
            result = await fn(*args, **kwargs)
        finally:
            if tracker is not None:
                boundary.untrack(tracker)
        return boundary.returned(result)


async def run_async_generator(  # noqa: PLR0917 -- as run()
    spec: CallSpec,
    fn: Callable[..., AsyncIterator[Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    owner: int | None = None,
    mode: str = "ray",
    actor_id: str | None = None,
    parent: str | None = None,
    attempt: int = 0,
) -> AsyncIterator[Any]:
    """Run an async generator function as one call."""
    boundary = Boundary(spec, fn, args, kwargs, owner, mode, actor_id, parent, attempt, cpu=False)
    with boundary:
        if boundary.call is not None:  # where its frames are while it awaits (see .waits)
            boundary.call.task = asyncio.current_task()
            on_demand.loop_started(boundary.call)
        if (tracker := boundary.tracker) is not None:
            try:
                tracker.__enter__()
            except Exception as exc:
                tracker = boundary.not_tracked(exc)  # None: the call runs unprofiled
        try:
            async for item in fn(*args, **kwargs):
                yield item
        finally:
            if tracker is not None:
                boundary.untrack(tracker)


def _hook_process(spec: CallSpec) -> None:
    """Once per worker: its hooks on what it submits. Never raises."""
    state = worker_state.state
    if not state.parents_hooked:
        state.parents_hooked = True
        try:  # method calls name their parent
            parents.install_method_hook()
        except Exception as exc:
            writer.report_failure("parents", "cannot name the parents of method calls", exc)
    program = spec.options.program
    if program is not None and not state.program_installed:
        state.program_installed = True
        try:  # instrument(): what this worker submits is instrumented too
            program.install(spec.options)
        except Exception as exc:
            writer.report_failure("program", "cannot instrument this worker's calls", exc)


def _shown(
    args: tuple[Any, ...], kwargs: dict[str, Any], fn: Callable[..., Any], owner: int | None
) -> tuple[tuple[Any, ...], dict[str, Any], tuple[str, ...]]:
    """What ``log_args`` shows: the arguments, their parameter names, no ``self``/``cls``."""
    names = _positional_names(fn)
    skip = 1 if names and (owner is not None or names[0] in {"self", "cls"}) and args else 0
    return args[skip:], kwargs, names[skip:]


@_registry.cleared_on_reset
@functools.lru_cache(maxsize=256)
def _positional_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    try:
        parameters = inspect.signature(inspect.unwrap(fn)).parameters.values()
    except (TypeError, ValueError):
        return ()
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in parameters if p.kind in positional)

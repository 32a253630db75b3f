"""Local actors: created, called, killed and named in this process, as Ray's would be."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable
from typing import Any

from ray.exceptions import ActorDiedError, RayTaskError, TaskCancelledError

from raytrace_kit._local import actor_loop, arguments, async_calls, refs, run, setting
from raytrace_kit._local import state as local_state
from raytrace_kit._local.actor import INTENDED_EXIT, LocalActor, death, die, get_live
from raytrace_kit._local.copies import keep_alive
from raytrace_kit._local.refs import LocalRef
from raytrace_kit._local.setting import LocalConfig
from raytrace_kit._options import DebugOptions
from raytrace_kit._ray_versions import ActorAlreadyExistsError

__all__ = ["LocalActorHandle", "LocalActorMethod", "create_actor", "get_actor", "kill"]


# Methods Ray adds to every actor, and the dunders a caller may invoke through a handle.
_RAY_METHODS = frozenset({"__ray_ready__", "__ray_terminate__"})
_REMOTE_DUNDERS = _RAY_METHODS | {"__call__"}


class LocalActorHandle(refs.InProcess):
    """The handle of an actor created in local mode; use it like an ``ActorHandle``.

    It can be pickled and passed to other calls, as Ray passes actor handles: it refers to
    the actor by id, in this process.
    """

    def __init__(self, actor: LocalActor) -> None:
        self._actor = actor

    def __getattr__(self, name: str) -> LocalActorMethod:
        actor = self.__dict__.get("_actor")
        if actor is None or (name.startswith("__") and name not in _REMOTE_DUNDERS):
            raise AttributeError(name)
        if name not in _RAY_METHODS and not callable(getattr(actor.cls, name, None)):
            msg = f"'{actor.cls.__name__}' actor has no method '{name}'"
            raise AttributeError(msg)
        return LocalActorMethod(actor, name, {})

    def __reduce__(self) -> tuple[Any, ...]:
        keep_alive(self._actor)  # a copy holding this handle keeps the actor, as in Ray
        return _handle_of, (self._actor.actor_id,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalActorHandle) and other._actor is self._actor

    def __hash__(self) -> int:
        return hash(self._actor.actor_id)

    def __repr__(self) -> str:
        return f"Actor({self._actor.cls.__name__}, {self._actor.actor_id})"


def _handle_of(actor_id: str) -> LocalActorHandle:
    """Unpickle a local actor handle: the live actor of that id, in this process.

    Raises:
        ValueError: No such actor here (a handle pickled in another process).
    """
    actor = local_state.state.actors_by_id.get(actor_id)
    if actor is None:
        msg = (
            f"The local actor {actor_id} does not exist in this process: local actor handles "
            "only work in the process that created the actor."
        )
        raise ValueError(msg)
    return LocalActorHandle(actor)


class LocalActorMethod:
    """A method of a local actor: ``.remote(...)`` and ``.options(...)``.

    ``num_returns``, ``max_task_retries`` and ``retry_exceptions`` apply, as in Ray; the
    other options are accepted and have no effect in one process.
    """

    def __init__(self, actor: LocalActor, name: str, options: dict[str, Any]) -> None:
        self._actor = actor
        self._name = name
        self._call_options = options

    def options(self, **options: Any) -> LocalActorMethod:
        """Per-call options, as ``ActorMethod.options``."""
        return LocalActorMethod(self._actor, self._name, {**self._call_options, **options})

    def __reduce__(self) -> tuple[Any, ...]:
        return getattr, (LocalActorHandle(self._actor), self._name)

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Call the method: now, in this thread (async actors: on the actor's loop)."""
        actor = self._actor
        name = self._name
        if name == "__ray_terminate__":
            return self._terminate()
        if name != "__ray_ready__":
            arguments.check_call(
                actor.signature(name), args, kwargs, actor.arity(name)
            )  # where Ray checks them
        current = setting.current()
        config = current if current.enabled else setting.DEFAULT_ON
        spec = actor.spec(name)
        if actor.dead is not None:
            return refs.error_ref(actor.dead, spec.function)
        if name == "__ray_ready__":
            return refs.value_ref(True, False, spec.function)
        method = getattr(actor.cls, name)
        num_returns = self._call_options.get("num_returns")
        if num_returns is None:
            num_returns = getattr(inspect.unwrap(method), "__ray_num_returns__", None)
        if actor.loop is not None:
            return self._on_loop(
                actor.loop, method, args, kwargs, config=config, num_returns=num_returns
            )
        if actor.generators:
            actor.drain_generators()
        if actor.lock is None:
            return self._call(method, config, num_returns, args, kwargs)
        with actor.lock:
            return self._call(method, config, num_returns, args, kwargs)

    def _terminate(self) -> Any:
        """Ray's graceful exit: calls submitted before it finish first."""
        actor = self._actor
        function = actor.spec(self._name).function
        if actor.loop is None:
            actor.drain_generators()
            die(actor, death(actor, INTENDED_EXIT))
            # As in Ray, the exit's own ref raises: the actor died while "running" it.
            return refs.error_ref(actor.dead or ActorDiedError(), function)

        if actor.dead is not None:
            return refs.error_ref(actor.dead, function)

        async def terminate() -> Any:
            die(actor, death(actor, INTENDED_EXIT))
            return refs.error_ref(actor.dead or ActorDiedError(), function)

        return _pending(actor.loop.submit(terminate), 1, actor)

    def _instance(self) -> Any:
        actor = self._actor
        # Static and class methods get no instance, as in Ray (getattr gave them unbound).
        unbound = isinstance(
            inspect.getattr_static(actor.cls, self._name), staticmethod | classmethod
        )
        return None if unbound else actor.instance

    def _call(
        self,
        method: Callable[..., Any],
        config: LocalConfig,
        num_returns: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        actor = self._actor
        retry = actor.retry(self._name, self._call_options)
        try:
            with retry.environment():
                made = run.run(
                    actor.spec(self._name),
                    method,
                    args,
                    kwargs,
                    config=config,
                    num_returns=num_returns,
                    instance=self._instance(),
                    actor_id=actor.actor_id,
                    generator=arguments.is_generator(method),
                    retry=retry,
                    task_name=self._call_options.get("name"),
                )
        except SystemExit:  # exit_actor() or sys.exit(): the actor ends, as in Ray
            _exited(actor)
            return _died_refs(actor, num_returns, actor.spec(self._name).function)
        if isinstance(made, refs.LocalRefGenerator) and made._step is not None:
            step = made._step
            function = actor.spec(self._name).function

            def guarded() -> LocalRef:
                if actor.dead is not None:  # killed mid-stream: the next ref says so
                    made._step = None
                    return refs.error_ref(actor.dead, function)
                try:
                    return step()
                except SystemExit:
                    _exited(actor)
                    made._step = None
                    return refs.error_ref(actor.dead or ActorDiedError(), function)

            made._step = guarded
            actor.generators.append(made)
        return made

    def _on_loop(
        self,
        actor_loop: actor_loop.ActorLoop,
        method: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        config: LocalConfig,
        num_returns: Any,
    ) -> Any:
        """A call of an async actor: scheduled on its loop; pending refs come back now."""
        actor = self._actor
        spec = actor.spec(self._name)
        instance = self._instance()
        submitted = arguments.HeldArguments(args, kwargs, config, spec.function)  # copied now
        if arguments.is_generator(method) and num_returns in (None, "streaming"):

            def on_exit(ended: BaseException | None) -> LocalRef:
                if isinstance(ended, SystemExit):
                    _exited(actor)
                return refs.error_ref(actor.dead or ActorDiedError(), spec.function)

            return async_calls.LoopGenerator(
                actor_loop,
                spec,
                method,
                submitted,
                config=config,
                instance=instance,
                actor_id=actor.actor_id,
                on_exit=on_exit,
            ).generator()
        retry = actor.retry(self._name, self._call_options)

        async def body() -> Any:
            if actor.dead is not None:
                return _died_refs(actor, num_returns, spec.function)
            try:
                async with actor.concurrency():  # max_concurrency, as Ray applies it
                    made = await async_calls.run_async_method(
                        spec,
                        method,
                        submitted,
                        config=config,
                        num_returns=num_returns,
                        instance=instance,
                        actor_id=actor.actor_id,
                        retry=retry,
                        task_name=self._call_options.get("name"),
                    )
            except SystemExit:  # exit_actor() or sys.exit(): the actor ends, as in Ray
                _exited(actor)
                return _died_refs(actor, num_returns, spec.function)
            except asyncio.CancelledError:
                cancelled = None if _dead(actor) else TaskCancelledError()
                return _died_refs(actor, num_returns, spec.function, cancelled)
            # Killed while it ran: its refs report the actor's death, as in Ray.
            return _died_refs(actor, num_returns, spec.function) if _dead(actor) else made

        count = 1 if num_returns in (None, "dynamic") else int(num_returns)
        future = actor_loop.submit(body)
        return None if count == 0 else _pending(future, count, actor)


def _exited(actor: LocalActor) -> None:
    """The actor's code ended it (``exit_actor()``, ``sys.exit()``): Ray's intended exit."""
    die(actor, death(actor, INTENDED_EXIT))


def _dead(actor: LocalActor) -> bool:
    """Whether the actor died (read anew: another thread or an await may have killed it)."""
    return actor.dead is not None


def _died_refs(
    actor: LocalActor, num_returns: Any, function: str, error: BaseException | None = None
) -> Any:
    """The refs of a call that ended with its actor (or was cancelled)."""
    ref = refs.error_ref(error or actor.dead or ActorDiedError(), function)
    count = 1 if num_returns in (None, "streaming", "dynamic") else int(num_returns)
    if count == 0:
        return None
    return ref if count == 1 else [ref] * count


def _pending(future: concurrent.futures.Future[Any], count: int, actor: LocalActor) -> Any:
    """``count`` pending refs, each resolving to its part of what ``future`` gives."""

    def part(index: int) -> LocalRef:
        chained: concurrent.futures.Future[LocalRef] = concurrent.futures.Future()

        def settle(done: concurrent.futures.Future[Any]) -> None:
            if done.cancelled():  # cancelled before it started
                error = actor.dead or TaskCancelledError()
                chained.set_result(refs.error_ref(error, ""))
            elif (exc := done.exception()) is not None:
                chained.set_exception(exc)
            else:
                made = done.result()
                chained.set_result(made if count == 1 else made[index])

        future.add_done_callback(settle)
        chained.cancel_call = getattr(future, "cancel_call", None)  # type: ignore[attr-defined]
        return refs.pending_ref(chained)

    made = [part(i) for i in range(count)]
    return made[0] if count == 1 else made


def create_actor(
    cls: type,
    options: DebugOptions,
    ray_options: dict[str, Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    config: LocalConfig,
) -> LocalActorHandle:
    """Create an actor of a debuggable class in this process; return its handle.

    Raises:
        TypeError: The arguments do not fit ``__init__``, as Ray raises at ``.remote()``.
        ValueError: The name is taken and ``get_if_exists`` was not given, as in Ray
            (``ActorAlreadyExistsError`` from Ray 2.53, a plain ``ValueError`` before).
    """
    arguments.check_call(inspect.signature(cls), args, kwargs)  # where Ray checks them
    name: str | None = ray_options.get("name")
    key = (str(name), ray_options.get("namespace"))
    state = local_state.state
    with state.lock:
        existing = state.actors.get(key) if name else None
        if existing is not None and existing.dead is None:
            if ray_options.get("get_if_exists"):
                return LocalActorHandle(existing)
            # Ray's own error and message (ActorAlreadyExistsError is a ValueError).
            msg = (
                f"The name {name} (namespace={key[1]}) is already taken. Please use a different "
                f"name or get the existing actor using ray.get_actor('{name}', "
                f"namespace='{key[1]}')"
            )
            raise ActorAlreadyExistsError(msg)
        actor = LocalActor(cls, options, ray_options)
        if name:
            state.actors[key] = actor
            if ray_options.get("lifetime") == "detached":
                state.detached.append(actor)  # lives on without handles, as in Ray

    def construct(*init_args: Any, **init_kwargs: Any) -> None:
        actor.instance = cls(*init_args, **init_kwargs)

    spec = actor.spec("__init__")
    try:
        prepared_args, prepared_kwargs = arguments.prepare_arguments(
            args, kwargs, config, spec.function
        )
    except RayTaskError as failed_dependency:
        # As in Ray: the creation task fails ("could not compute an argument"), and every
        # call of the actor raises ActorDiedError with that error. (The dual error that
        # ray.get raises delegates attributes to its cause: ActorDiedError cannot take it.)
        actor.dead = ActorDiedError(refs.task_error(failed_dependency, spec.function))
        return LocalActorHandle(actor)
    try:
        with actor.retry("__init__", {}).environment():
            outcome = run.execute_call(
                spec, construct, prepared_args, prepared_kwargs, config, actor_id=actor.actor_id
            )
    except SystemExit:
        return LocalActorHandle(actor)  # exit_actor() in __init__: dead from the start
    if outcome.error is not None:
        # As in Ray: creation "succeeds", and every call then fails with ActorDiedError.
        actor.dead = ActorDiedError(refs.task_error(outcome.error, spec.function))
    return LocalActorHandle(actor)


def kill(handle: Any) -> bool:
    """``ray.kill`` of a local actor: it dies here; ``False`` if ``handle`` is not local."""
    if not isinstance(handle, LocalActorHandle):
        return False
    die(handle._actor, death(handle._actor, "The actor was killed by `ray.kill`."))
    return True


def get_actor(name: str, namespace: str | None) -> LocalActorHandle | None:
    """The live local actor of that name, or ``None``."""
    actor = get_live(name, namespace)
    return None if actor is None else LocalActorHandle(actor)

"""Local mode: run debuggable calls synchronously in this process, with Ray's semantics.

Ray removed ``ray.init(local_mode=True)``. Here a call made in local mode runs in the
calling thread, in submission order, so ``breakpoint()``, pdb, IDE breakpoints and a
driver-side profiler see the user's code directly. Arguments and results go through
Ray's serializer (a copy, unless ``copy=False``), refs passed as top-level arguments are
resolved, and failures surface at ``ray.get`` as the ``RayTaskError`` Ray would raise.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import pdb
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ray.exceptions import ActorDiedError, RayTaskError

from raytrace_kit import _events, _execute, _refs
from raytrace_kit._execute import CallSpec, qualified_name
from raytrace_kit._options import DebugOptions

if TYPE_CHECKING:
    from raytrace_kit._submit import DebuggableActorClass, DebuggableFunction

__all__ = [
    "ENV_LOCAL_MODE",
    "LocalActorHandle",
    "LocalConfig",
    "activate",
    "config_for",
    "create_actor",
    "is_local_mode",
    "local_mode",
    "reset",
    "set_local_mode",
    "submit_task",
]

ENV_LOCAL_MODE = "RAYTRACE_LOCAL_MODE"


@dataclass(frozen=True, slots=True)
class LocalConfig:
    """How local calls run.

    Attributes:
        enabled: Whether debuggable calls run locally.
        copy: Copy arguments and results through Ray's serializer.
        post_mortem: Open ``pdb.post_mortem`` at the failing frame when a call raises.
    """

    enabled: bool = True
    copy: bool = True
    post_mortem: bool = False


_OFF = LocalConfig(enabled=False)
_DEFAULT_ON = LocalConfig()

# The process-wide setting (set_local_mode, RAYTRACE_LOCAL_MODE) ...
_global = _OFF
# ... overridden in a context by `with local_mode(...)`, and while a local call runs (so
# calls made from inside it run locally too).
_override: contextvars.ContextVar[LocalConfig | None] = contextvars.ContextVar(
    "raytrace_kit_local_mode", default=None
)
# False until local mode is first used: .remote() then skips every other check.
maybe_active = False
_lock = threading.Lock()


def activate() -> None:
    """Install the ``ray.*`` hooks and enable local routing (idempotent)."""
    global maybe_active  # noqa: PLW0603 -- a one-way switch, reset() for tests
    if not maybe_active:
        _refs.install_ray_hooks()
        maybe_active = True


def _current() -> LocalConfig:
    override = _override.get()
    return _global if override is None else override


def is_local_mode() -> bool:
    """Whether debuggable calls made here run in this process.

    Returns:
        ``True`` inside ``with local_mode():``, after ``set_local_mode(True)`` (or with
        ``RAYTRACE_LOCAL_MODE=1``), and inside a call that runs locally.
    """
    return _current().enabled


def set_local_mode(enabled: bool, *, copy: bool = True, post_mortem: bool = False) -> None:
    """Turn local mode on or off for the whole process.

    ``with local_mode():`` blocks take precedence inside them.

    Args:
        enabled: Run debuggable calls in this process.
        copy: Copy arguments and results through Ray's serializer, as Ray does.
        post_mortem: Open ``pdb.post_mortem`` when a local call raises.
    """
    global _global  # noqa: PLW0603 -- the process-wide setting
    if not isinstance(enabled, bool):
        msg = f"set_local_mode() takes True or False, not {enabled!r}."  # type: ignore[unreachable]  # untyped callers
        raise TypeError(msg)
    if enabled:
        activate()
    with _lock:
        _global = LocalConfig(enabled=enabled, copy=copy, post_mortem=post_mortem)


@contextmanager
def local_mode(
    enabled: bool = True, *, copy: bool = True, post_mortem: bool = False
) -> Iterator[None]:
    """Run every debuggable call made inside the block in this process.

    Nothing else changes in the code inside: ``f.remote(x)``, ``ray.get``, ``ray.wait``,
    ``ray.put``, actors, ``ray.get_actor`` and ``ray.kill`` work with or without
    ``ray.init()``; without it, no cluster is started. Blocks nest and restore the previous
    state on exit, also on exceptions. The setting belongs to the current thread or asyncio
    task (a ``contextvars`` context): threads started inside the block do not inherit it;
    use :func:`set_local_mode` for the whole process.

    Args:
        enabled: ``False`` turns local mode off inside the block.
        copy: Copy arguments and results through Ray's serializer (the default), so a call
            that mutates its argument does not change the caller's object and values Ray
            cannot serialize fail as in Ray. ``False`` passes objects as they are: faster,
            but a mutation is then visible to the caller.
        post_mortem: Open ``pdb.post_mortem`` at the failing frame when a call raises.

    Example:
        >>> with local_mode():
        ...     result = ray.get(transform.remote(data))  # runs here; breakpoint() works
    """
    if enabled:
        activate()
    token = _override.set(LocalConfig(enabled=enabled, copy=copy, post_mortem=post_mortem))
    try:
        yield
    finally:
        _override.reset(token)


def config_for(options: DebugOptions) -> LocalConfig | None:
    """The local config a call with ``options`` runs under, or ``None`` to go to Ray."""
    if options.local is False:
        return None
    current = _current()
    if current.enabled:
        return current
    if options.local:
        return _DEFAULT_ON if _global is _OFF else LocalConfig(copy=_global.copy)
    return None


def reset() -> None:
    """Forget local actors, turn local mode off and remove the ``ray.*`` hooks (tests)."""
    global _global, maybe_active  # noqa: PLW0603 -- see reset()
    with _lock:
        _global = _OFF
        maybe_active = False
        for actor in list(_actors_by_name.values()):
            actor.dead = ActorDiedError()
        _actors_by_name.clear()
    _refs.uninstall_ray_hooks()


def _initial_global() -> LocalConfig:
    value = os.environ.get(ENV_LOCAL_MODE, "").strip().lower()
    if value in {"1", "true", "yes", "on"}:
        activate()
        return _DEFAULT_ON
    return _OFF


# --- running one call ---------------------------------------------------------------------


class _Outcome:
    """What a local call produced: a value (or generator items) and/or an exception."""

    __slots__ = ("error", "items", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.items: list[Any] | None = None
        self.error: BaseException | None = None


def _prepare_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any], config: LocalConfig, function: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Resolve top-level refs and copy, as Ray does on submission.

    Raises:
        TypeError: An argument cannot be serialized (raised at ``.remote()``, as in Ray).
        RayTaskError: An argument is the ref of a failed call.
    """
    args = tuple(_refs.resolve_argument(a) for a in args)
    kwargs = {k: _refs.resolve_argument(v) for k, v in kwargs.items()}
    if not config.copy:
        return args, kwargs
    try:
        return _refs.copy_value((args, kwargs))  # type: ignore[no-any-return]
    except Exception as exc:
        bad = next((a for a in (*args, *kwargs.values()) if not _copyable(a)), None)
        msg = (
            f"Could not serialize the argument {bad!r} for a task or actor {function} "
            f"(local mode copies arguments as Ray serializes them): {exc}"
        )
        raise TypeError(msg) from exc


def _copyable(value: Any) -> bool:
    try:
        _refs.copy_value(value)
    except Exception:
        return False
    return True


def _execute_call(
    spec: CallSpec,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    config: LocalConfig,
    *,
    owner: int | None = None,
    actor_id: str | None = None,
    generator: bool = False,
) -> _Outcome:
    """Run one call in this thread, inside the instrumentation boundary."""
    outcome = _Outcome()
    token = _override.set(config)  # calls made from inside run locally too
    try:
        with _execute._Boundary(spec, owner, mode="local", actor_id=actor_id):
            result = fn(*args, **kwargs)
            if generator and inspect.isgenerator(result):
                outcome.items = []
                for item in result:  # run to completion: calls are synchronous
                    outcome.items.append(item)
            else:
                outcome.value = result
    except Exception as exc:
        outcome.error = exc
        if config.post_mortem or spec.options.post_mortem:
            pdb.post_mortem(exc.__traceback__)
    finally:
        _override.reset(token)
    return outcome


def _package(outcome: _Outcome, num_returns: Any, copy: bool, function: str) -> Any:
    """Turn an outcome into what ``.remote()`` returns in Ray for these ``num_returns``."""
    if outcome.items is not None and num_returns in (None, "streaming"):
        refs = [_refs.value_ref(item, copy, function) for item in outcome.items]
        if outcome.error is not None:
            refs.append(_refs.error_ref(outcome.error, function))
        return _refs.LocalRefGenerator(refs)
    if num_returns == "dynamic":
        if outcome.error is not None:
            return _refs.error_ref(outcome.error, function)
        produced = outcome.items if outcome.items is not None else list(outcome.value)
        inner = _refs.LocalRefGenerator([_refs.value_ref(v, copy, function) for v in produced])
        return _refs.value_ref(inner, False, function)
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
        refs = [_refs.error_ref(error, function) for _ in range(count)]
    else:
        refs = [_refs.value_ref(v, copy, function) for v in values]
    return refs[0] if count == 1 else refs


def _run(
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
) -> Any:
    owner = None
    try:
        args, kwargs = _prepare_arguments(args, kwargs, config, spec.function)
        if actor_id is not None:  # the actor itself is not an argument: never copied
            args, owner = (instance, *args), id(instance)
    except RayTaskError as failed_dependency:
        outcome = _Outcome()
        outcome.error = failed_dependency
    else:
        outcome = _execute_call(
            spec, fn, args, kwargs, config, owner=owner, actor_id=actor_id, generator=generator
        )
    if isinstance(outcome.error, RayTaskError):
        ref = _refs.error_ref(outcome.error, spec.function)
        count = 1 if num_returns in (None, "streaming", "dynamic") else int(num_returns)
        return ref if count == 1 else [ref] * count
    return _package(outcome, num_returns, config.copy, spec.function)


def _is_generator(fn: Callable[..., Any]) -> bool:
    original = getattr(fn, "__raytrace_method__", fn)
    return inspect.isgeneratorfunction(original) or inspect.isasyncgenfunction(original)


def submit_task(
    task: DebuggableFunction[..., Any],
    config: LocalConfig,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """Run a debuggable function's call here; return what ``.remote()`` returns in Ray."""
    activate()  # @debuggable(local=True) can be the first use of local mode
    spec, num_returns, generator = task._local_call_info()
    return _run(
        spec,
        task._python,
        args,
        kwargs,
        config=config,
        num_returns=num_returns,
        generator=generator,
    )


# --- actors -------------------------------------------------------------------------------


class _LocalActor:
    """One actor living in this process."""

    def __init__(self, cls: type, options: DebugOptions, ray_options: dict[str, Any]) -> None:
        self.cls = cls
        self.options = options
        self.name: str | None = ray_options.get("name")
        self.namespace: str | None = ray_options.get("namespace")
        self.actor_id = os.urandom(16).hex()
        self.instance: Any = None
        self.dead: BaseException | None = None
        self.prefix = qualified_name(cls)
        self.specs: dict[str, CallSpec] = {}
        # Ray runs one call at a time unless max_concurrency says otherwise. Reentrant: a
        # method that calls its own actor synchronously would deadlock in Ray; here it
        # runs, which is the more useful thing while debugging.
        concurrent = int(ray_options.get("max_concurrency") or 1) > 1
        self.lock: threading.RLock | None = None if concurrent else threading.RLock()

    def spec(self, method: str) -> CallSpec:
        spec = self.specs.get(method)
        if spec is None:
            kind = "actor_init" if method == "__init__" else "actor_method"
            spec = self.specs[method] = CallSpec(f"{self.prefix}.{method}", kind, self.options)
        return spec


class LocalActorHandle:
    """The handle of an actor created in local mode; use it like an ``ActorHandle``."""

    def __init__(self, actor: _LocalActor) -> None:
        self._actor = actor

    def __getattr__(self, name: str) -> LocalActorMethod:
        actor = self.__dict__.get("_actor")
        if actor is None or (name.startswith("__") and name != "__ray_ready__"):
            raise AttributeError(name)
        if name != "__ray_ready__" and not callable(getattr(actor.cls, name, None)):
            msg = f"'{actor.cls.__name__}' actor has no method '{name}'"
            raise AttributeError(msg)
        return LocalActorMethod(actor, name, None)

    def __repr__(self) -> str:
        return f"LocalActor({self._actor.cls.__name__}, {self._actor.actor_id})"


class LocalActorMethod:
    """A method of a local actor: ``.remote(...)`` and ``.options(num_returns=...)``."""

    def __init__(self, actor: _LocalActor, name: str, num_returns: Any) -> None:
        self._actor = actor
        self._name = name
        self._num_returns = num_returns

    def options(self, **options: Any) -> LocalActorMethod:
        """Per-call options; ``num_returns`` applies, the others are accepted and ignored."""
        return LocalActorMethod(self._actor, self._name, options.get("num_returns"))

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Call the method now, in this thread; returns its ref(s)."""
        actor = self._actor
        current = _current()
        config = current if current.enabled else _DEFAULT_ON
        spec = actor.spec(self._name)
        if actor.dead is not None:
            return _refs.error_ref(actor.dead, spec.function)
        if self._name == "__ray_ready__":
            return _refs.value_ref(True, False, spec.function)
        method = getattr(actor.cls, self._name)
        num_returns = self._num_returns
        if num_returns is None:
            num_returns = getattr(inspect.unwrap(method), "__ray_num_returns__", None)
        if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
            method = _on_private_loop(method, config)
        if actor.lock is None:
            return self._call(method, config, num_returns, args, kwargs)
        with actor.lock:
            return self._call(method, config, num_returns, args, kwargs)

    def _call(
        self,
        method: Callable[..., Any],
        config: LocalConfig,
        num_returns: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        actor = self._actor
        instance = actor.instance
        return _run(
            actor.spec(self._name),
            method,
            args,
            kwargs,
            config=config,
            num_returns=num_returns,
            instance=instance,
            actor_id=actor.actor_id,
            generator=_is_generator(method),
        )


_refs.register_identity_type(LocalActorHandle)

# name -> actor (namespaces are part of the key when given).
_actors_by_name: dict[tuple[str, str | None], _LocalActor] = {}


def create_actor(
    actor_class: DebuggableActorClass[Any],
    config: LocalConfig,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> LocalActorHandle:
    """Create an actor of a debuggable class in this process; return its handle.

    Raises:
        ValueError: The name is taken and ``get_if_exists`` was not given, as in Ray.
    """
    activate()
    cls, options, ray_options = actor_class._local_actor_info()
    name: str | None = ray_options.get("name")
    key = (str(name), ray_options.get("namespace"))
    with _lock:
        existing = _actors_by_name.get(key) if name else None
        if existing is not None and existing.dead is None:
            if ray_options.get("get_if_exists"):
                return LocalActorHandle(existing)
            msg = f"The name {name} (namespace={key[1]}) is already taken by a local actor."
            raise ValueError(msg)
        actor = _LocalActor(cls, options, ray_options)
        if name:
            _actors_by_name[key] = actor

    def construct(*init_args: Any, **init_kwargs: Any) -> None:
        actor.instance = cls(*init_args, **init_kwargs)

    spec = actor.spec("__init__")
    try:
        prepared_args, prepared_kwargs = _prepare_arguments(args, kwargs, config, spec.function)
    except RayTaskError as failed_dependency:
        actor.dead = ActorDiedError(failed_dependency)
        return LocalActorHandle(actor)
    outcome = _execute_call(
        spec, construct, prepared_args, prepared_kwargs, config, actor_id=actor.actor_id
    )
    if outcome.error is not None:
        # As in Ray: creation "succeeds", and every call then fails with ActorDiedError.
        actor.dead = ActorDiedError(_refs.task_error(outcome.error, spec.function))
    return LocalActorHandle(actor)


def _kill(handle: Any) -> bool:
    if not isinstance(handle, LocalActorHandle):
        return False
    actor = handle._actor
    actor.dead = ActorDiedError()
    with _lock:
        for key, value in list(_actors_by_name.items()):
            if value is actor:
                del _actors_by_name[key]
    return True


def _get_actor(name: str, namespace: str | None) -> LocalActorHandle | None:
    with _lock:
        actor = _actors_by_name.get((name, namespace))
        if actor is None and namespace is None:
            actor = next((a for (n, _), a in _actors_by_name.items() if n == name), None)
    return None if actor is None or actor.dead is not None else LocalActorHandle(actor)


_refs.local_put_enabled = is_local_mode
_refs.local_kill = _kill
_refs.local_get_actor = _get_actor


# --- async methods: run to completion on a private event loop ----------------------------

_loop: asyncio.AbstractEventLoop | None = None


def _private_loop() -> asyncio.AbstractEventLoop:
    """One event loop for local async actors, in a daemon thread.

    A separate thread works from inside a running loop too (a notebook, an async test).
    """
    global _loop  # noqa: PLW0603 -- created once per process
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="raytrace_kit-local-loop", daemon=True
            )
            thread.start()
            _loop = loop
        return _loop


def _on_private_loop(method: Callable[..., Any], config: LocalConfig) -> Callable[..., Any]:
    """Wrap an async method so that calling it runs it to completion on the private loop.

    The call's context (the running call, local mode) is carried into the loop's task by
    hand: ``create_task(context=...)`` needs Python 3.11.
    """

    async def in_context(call: Any, *args: Any, **kwargs: Any) -> Any:
        tokens = (_override.set(config), _events.CURRENT_CALL.set(call))
        try:
            result = method(*args, **kwargs)
            if inspect.isasyncgen(result):
                return [item async for item in result]
            return await result
        finally:
            _events.CURRENT_CALL.reset(tokens[1])
            _override.reset(tokens[0])

    def call(*args: Any, **kwargs: Any) -> Any:
        running = _events.CURRENT_CALL.get()
        coroutine = in_context(running, *args, **kwargs)
        result = asyncio.run_coroutine_threadsafe(coroutine, _private_loop()).result()
        if inspect.isasyncgenfunction(method):
            return (item for item in result)  # generator items, as for sync generators
        return result

    call.__raytrace_method__ = method  # type: ignore[attr-defined]  # for _is_generator
    return call


_global = _initial_global()

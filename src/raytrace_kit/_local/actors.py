"""Local actors: created, called, killed and named in this process, as Ray's would be."""

from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable
from typing import Any

from ray.exceptions import ActorAlreadyExistsError, ActorDiedError, RayTaskError

from raytrace_kit import _process
from raytrace_kit._local import loop, mode, refs, run
from raytrace_kit._local.mode import LocalConfig
from raytrace_kit._options import CallSpec, DebugOptions, qualified_name

__all__ = ["LocalActorHandle", "LocalActorMethod", "create_actor", "get_actor", "kill"]


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
        self.signatures: dict[str, inspect.Signature] = {}
        # Ray runs one call at a time unless max_concurrency says otherwise. Reentrant: a
        # method that calls its own actor synchronously would deadlock in Ray; here it
        # runs, which is the more useful thing while debugging.
        concurrent = int(ray_options.get("max_concurrency") or 1) > 1
        self.lock: threading.RLock | None = None if concurrent else threading.RLock()

    def signature(self, method: str) -> inspect.Signature:
        """What a caller passes to ``method`` (no ``self``), as Ray checks it at ``.remote()``."""
        signature = self.signatures.get(method)
        if signature is None:
            member = inspect.getattr_static(self.cls, method, None)
            signature = inspect.signature(getattr(self.cls, method))  # class methods: bound
            if not isinstance(member, staticmethod | classmethod):
                signature = signature.replace(parameters=list(signature.parameters.values())[1:])
            self.signatures[method] = signature
        return signature

    def spec(self, method: str) -> CallSpec:
        spec = self.specs.get(method)
        if spec is None:
            kind = "actor_init" if method == "__init__" else "actor_method"
            spec = self.specs[method] = CallSpec(f"{self.prefix}.{method}", kind, self.options)
        return spec


# Methods Ray adds to every actor, and the dunders a caller may invoke through a handle.
_RAY_METHODS = frozenset({"__ray_ready__", "__ray_terminate__"})
_REMOTE_DUNDERS = _RAY_METHODS | {"__call__"}


class LocalActorHandle(refs.InProcess):
    """The handle of an actor created in local mode; use it like an ``ActorHandle``."""

    def __init__(self, actor: _LocalActor) -> None:
        self._actor = actor

    def __getattr__(self, name: str) -> LocalActorMethod:
        actor = self.__dict__.get("_actor")
        if actor is None or (name.startswith("__") and name not in _REMOTE_DUNDERS):
            raise AttributeError(name)
        if name not in _RAY_METHODS and not callable(getattr(actor.cls, name, None)):
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
        if self._name == "__ray_terminate__":  # Ray's graceful exit: earlier calls are done
            kill(LocalActorHandle(actor))
            # As in Ray, the exit's own ref raises: the actor died while "running" it.
            return refs.error_ref(actor.dead or ActorDiedError(), actor.spec(self._name).function)
        if self._name != "__ray_ready__":
            run.check_call(actor.signature(self._name), args, kwargs)  # where Ray checks them
        current = mode.current()
        config = current if current.enabled else mode.DEFAULT_ON
        spec = actor.spec(self._name)
        if actor.dead is not None:
            return refs.error_ref(actor.dead, spec.function)
        if self._name == "__ray_ready__":
            return refs.value_ref(True, False, spec.function)
        method = getattr(actor.cls, self._name)
        num_returns = self._num_returns
        if num_returns is None:
            num_returns = getattr(inspect.unwrap(method), "__ray_num_returns__", None)
        if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
            method = loop.on_private_loop(method, config)
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
        # Static and class methods get no instance, as in Ray (getattr gave them unbound).
        unbound = isinstance(
            inspect.getattr_static(actor.cls, self._name), staticmethod | classmethod
        )
        instance = None if unbound else actor.instance
        return run.run(
            actor.spec(self._name),
            method,
            args,
            kwargs,
            config=config,
            num_returns=num_returns,
            instance=instance,
            actor_id=actor.actor_id,
            generator=run.is_generator(method),
        )


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
        ActorAlreadyExistsError: The name is taken and ``get_if_exists`` was not given, as
            in Ray (a ``ValueError``).
    """
    run.check_call(inspect.signature(cls), args, kwargs)  # where Ray checks them
    name: str | None = ray_options.get("name")
    key = (str(name), ray_options.get("namespace"))
    state = _process.state
    with state.lock:
        existing = state.local_actors.get(key) if name else None
        if existing is not None and existing.dead is None:
            if ray_options.get("get_if_exists"):
                return LocalActorHandle(existing)
            # Ray's own error and message (an ActorAlreadyExistsError is a ValueError).
            msg = (
                f"The name {name} (namespace={key[1]}) is already taken. Please use a different "
                f"name or get the existing actor using ray.get_actor('{name}', "
                f"namespace='{key[1]}')"
            )
            raise ActorAlreadyExistsError(msg)
        actor = _LocalActor(cls, options, ray_options)
        if name:
            state.local_actors[key] = actor

    def construct(*init_args: Any, **init_kwargs: Any) -> None:
        actor.instance = cls(*init_args, **init_kwargs)

    spec = actor.spec("__init__")
    try:
        prepared_args, prepared_kwargs = run.prepare_arguments(args, kwargs, config, spec.function)
    except RayTaskError as failed_dependency:
        actor.dead = ActorDiedError(failed_dependency)
        return LocalActorHandle(actor)
    outcome = run.execute_call(
        spec, construct, prepared_args, prepared_kwargs, config, actor_id=actor.actor_id
    )
    if outcome.error is not None:
        # As in Ray: creation "succeeds", and every call then fails with ActorDiedError.
        actor.dead = ActorDiedError(refs.task_error(outcome.error, spec.function))
    return LocalActorHandle(actor)


def kill(handle: Any) -> bool:
    """``ray.kill`` of a local actor: it dies here; ``False`` if ``handle`` is not local."""
    if not isinstance(handle, LocalActorHandle):
        return False
    actor = handle._actor
    actor.dead = ActorDiedError()
    state = _process.state
    with state.lock:
        for key, value in list(state.local_actors.items()):
            if value is actor:
                del state.local_actors[key]
    return True


def get_actor(name: str, namespace: str | None) -> LocalActorHandle | None:
    """The live local actor of that name, or ``None``."""
    actors = _process.state.local_actors
    with _process.state.lock:
        actor = actors.get((name, namespace))  # only in that namespace, as in Ray
    return None if actor is None or actor.dead is not None else LocalActorHandle(actor)

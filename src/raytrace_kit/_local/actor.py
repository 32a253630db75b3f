"""One local actor: its state, its retries, its loop, and its death.

Local actors are registered by id (weakly: an actor lives while a handle refers to it) and
by name. An actor dies as Ray's do: killed, by ``exit_actor()``, or by a failed
constructor; from then on every call's ref raises ``ActorDiedError``, worded as Ray's.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from typing import Any

from ray.exceptions import ActorDiedError, RayActorError

from raytrace_kit import _process
from raytrace_kit._local import actor_loop, refs
from raytrace_kit._local import state as local_state
from raytrace_kit._local.arguments import arity
from raytrace_kit._local.retry import Retry
from raytrace_kit._options import CallSpec, DebugOptions, qualified_name
from raytrace_kit._output.context import CURRENT_CALL

__all__ = [
    "INTENDED_EXIT",
    "ActorExit",
    "LocalActor",
    "death",
    "die",
    "exit_actor",
    "get_live",
    "is_async",
    "named_actors",
]


class LocalActor:
    """One actor living in this process."""

    def __init__(self, cls: type, options: DebugOptions, ray_options: dict[str, Any]) -> None:
        self.cls = cls
        self.options = options
        self.ray_options = ray_options
        self.name: str | None = ray_options.get("name")
        self.namespace: str | None = ray_options.get("namespace")
        # Ray's format: 12 unique bytes, then the job id.
        self.actor_id = os.urandom(12).hex() + (_process.local_identity().job_id or "0" * 8)
        self.instance: Any = None
        self.dead: BaseException | None = None
        self.prefix = qualified_name(cls)
        self.specs: dict[str, CallSpec] = {}
        self.signatures: dict[str, inspect.Signature] = {}
        self.shapes: dict[str, tuple[int, int] | None] = {}
        self.retries: dict[str, Retry] = {}
        # As Ray decides: an actor with any async method runs all its calls on its loop.
        self.loop: actor_loop.ActorLoop | None = (
            actor_loop.ActorLoop(f"local-actor-{cls.__name__}") if is_async(cls) else None
        )
        # Ray runs one call at a time unless max_concurrency says otherwise. Reentrant: a
        # method that calls its own actor synchronously would deadlock in Ray; here it
        # runs, which is the more useful thing while debugging.
        concurrent = int(ray_options.get("max_concurrency") or 1) > 1
        self.lock: threading.RLock | None = None if concurrent else threading.RLock()
        # Streaming generators of this actor still running: Ray runs a sync actor's
        # generator to its end before its next call, so the next call drains them first.
        self.generators: list[refs.LocalRefGenerator] = []
        # An async actor runs up to max_concurrency calls at once (Ray's default: 1000).
        self.max_concurrency = int(ray_options.get("max_concurrency") or 1000)
        self._semaphore: asyncio.Semaphore | None = None
        local_state.state.actors_by_id[self.actor_id] = self

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

    def arity(self, method: str) -> tuple[int, int] | None:
        """The method's positional shape (see :func:`.arity`), computed once."""
        shapes = self.shapes
        if method not in shapes:
            shapes[method] = arity(self.signature(method))
        return shapes[method]

    def spec(self, method: str) -> CallSpec:
        spec = self.specs.get(method)
        if spec is None:
            kind = "actor_init" if method == "__init__" else "actor_method"
            spec = self.specs[method] = CallSpec(f"{self.prefix}.{method}", kind, self.options)
        return spec

    def retry(self, method: str, call_options: dict[str, Any]) -> Retry:
        """Ray's retries of an actor method: ``max_task_retries`` with ``retry_exceptions``.

        The method's own options (``.options()``, then ``@ray.method``) come before the
        actor's; only exceptions named by ``retry_exceptions`` are retried, as in Ray.
        """
        cached = self.retries.get(method) if not call_options else None
        if cached is not None:
            return cached
        member = inspect.unwrap(getattr(self.cls, method, None) or (lambda: None))
        retries = call_options.get(
            "max_task_retries",
            getattr(member, "__ray_max_task_retries__", self.ray_options.get("max_task_retries")),
        )
        retry_on = call_options.get(
            "retry_exceptions",
            getattr(member, "__ray_retry_exceptions__", self.ray_options.get("retry_exceptions")),
        )
        made = Retry(
            {
                "max_retries": retries or 0,
                "retry_exceptions": retry_on,
                "runtime_env": self.ray_options.get("runtime_env"),
            }
        )
        if not call_options:
            self.retries[method] = made
        return made

    def concurrency(self) -> asyncio.Semaphore:
        """The semaphore that bounds an async actor's running calls (made on its loop)."""
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        return self._semaphore

    def drain_generators(self) -> None:
        """Run this actor's suspended streaming generators to their end (see ``generators``)."""
        while self.generators:
            self.generators.pop(0)._drain()


def is_async(cls: type) -> bool:
    return any(
        inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
        for _, member in inspect.getmembers(cls, inspect.isfunction)
    )


class ActorExit(SystemExit):
    """``ray.actor.exit_actor()`` called in a local actor: the actor ends after this call.

    Named as what Ray raises there, a ``SystemExit`` (an ``AsyncioActorExit`` in an async
    actor, :class:`AsyncActorExit`), so the call's ``call.end`` reads as on a cluster.
    """


class AsyncActorExit(ActorExit):
    """``ray.actor.exit_actor()`` called in an async local actor (see :class:`ActorExit`)."""


ActorExit.__name__ = ActorExit.__qualname__ = "SystemExit"
AsyncActorExit.__name__ = AsyncActorExit.__qualname__ = "AsyncioActorExit"


def exit_actor() -> bool:
    """``ray.actor.exit_actor()`` inside a local actor's call: end it, as Ray does.

    Returns:
        ``False`` if no local actor's call is running here (Ray's own function decides).

    Raises:
        SystemExit: Inside a local actor's call: the call ends and the actor dies; the
            call's refs and every later call raise ``ActorDiedError``, as in Ray.
    """
    call = CURRENT_CALL.get()
    actor_id = None if call is None or call.mode != "local" else call.local_actor_id
    if actor_id is None:
        return False
    actor = local_state.state.actors_by_id.get(actor_id)
    if actor is not None:
        die(actor, death(actor, INTENDED_EXIT))
    raise (AsyncActorExit if actor is not None and actor.loop is not None else ActorExit)(0)


INTENDED_EXIT = (
    "The actor is dead because its worker process has died. Worker exit type: "
    "INTENDED_USER_EXIT Worker exit detail: exit_actor() is called."
)


def death(actor: LocalActor, detail: str) -> ActorDiedError:
    """The ``ActorDiedError`` of a local actor, worded as Ray words it."""
    lines = [
        ActorDiedError.BASE_ERROR_MSG,
        f"\tclass_name: {actor.cls.__name__}",
        f"\tactor_id: {actor.actor_id}",
        f"\tpid: {os.getpid()}",
    ]
    if actor.name:
        lines.append(f"\tname: {actor.name}")
    lines.append(detail)
    error = ActorDiedError()
    RayActorError.__init__(error, actor.actor_id, "\n".join(lines), False, False)
    return error


def die(actor: LocalActor, error: BaseException) -> None:
    """The actor is dead: its name is free, its running async calls are cancelled."""
    if actor.dead is None:
        actor.dead = error
    state = local_state.state
    with state.lock:
        for key, value in list(state.actors.items()):
            if value is actor:
                del state.actors[key]
        if actor in state.detached:
            state.detached.remove(actor)
    if actor.loop is not None:
        actor.loop.cancel_all()


def get_live(name: str, namespace: str | None) -> LocalActor | None:
    """The live local actor of that name in that namespace (only there, as in Ray)."""
    actors = local_state.state.actors
    with local_state.state.lock:
        actor = actors.get((name, namespace))
    return None if actor is None or actor.dead is not None else actor


def named_actors(all_namespaces: bool) -> list[Any]:
    """``ray.util.list_named_actors`` for the live local actors (as Ray lists them)."""
    with local_state.state.lock:
        keys = [key for key, actor in local_state.state.actors.items() if actor.dead is None]
    if all_namespaces:
        return [{"name": name, "namespace": namespace or ""} for name, namespace in keys]
    return [name for name, namespace in keys if namespace is None]

"""The ``ray.*`` hooks of local mode, installed on first use (:func:`activate`).

With them, user code does not change between Ray and local mode: ``ray.get``, ``wait``,
``put``, ``kill``, ``get_actor``, ``cancel``, ``get_runtime_context``, ``get_gpu_ids``,
``ray.actor.exit_actor`` and ``ray.util.list_named_actors`` understand local refs, actors
and calls, and answer for this process in local mode instead of starting a cluster
(Ray's own functions start one on first use). Everything that is not local goes to Ray's
own functions untouched.

Plain ``@ray.remote`` calls (tasks, actor creation) made in local mode cannot run here:
they warn once per function, naming it and the fix, or raise
:class:`~raytrace_kit.LocalModeError` under ``local_mode(strict=True)``. Calls that go to
Ray get their top-level local refs as real refs (:func:`.refs.to_ray`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import ray
import ray.actor
import ray.remote_function
import ray.util

from raytrace_kit import _ray_compat
from raytrace_kit._local import actor as local_actor
from raytrace_kit._local import handles, refs, setting
from raytrace_kit._local import state as local_state
from raytrace_kit._local.context import LocalRuntimeContext
from raytrace_kit._local.refs import LocalRef, LocalRefGenerator
from raytrace_kit._output import writer
from raytrace_kit._output.context import CURRENT_CALL
from raytrace_kit._ray_compat import RAY_OWN
from raytrace_kit.exceptions import LocalModeError

__all__ = ["activate"]


def _local_without_ray() -> bool:
    return not ray.is_initialized() and setting.is_local_mode()


def _all_local(object_refs: list[Any] | tuple[Any, ...]) -> bool:
    return all(type(ref) is LocalRef for ref in object_refs)


def _get(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
    timeout = kwargs.get("timeout")
    if type(object_refs) is LocalRef:
        return object_refs.local_get(timeout)
    if isinstance(object_refs, list) and object_refs and _all_local(object_refs):
        if timeout is not None:  # one deadline for the whole list, as Ray's
            deadline = time.monotonic() + timeout
            for ref in object_refs:
                ref.local_settle(max(0.0, deadline - time.monotonic()))
        return [ref.local_get() for ref in object_refs]
    if isinstance(object_refs, list) and any(type(ref) is LocalRef for ref in object_refs):
        real = [ref for ref in object_refs if type(ref) is not LocalRef]
        fetched = iter(RAY_OWN["get"](real, *args, **kwargs) if real else [])
        return [
            ref.local_get(timeout) if type(ref) is LocalRef else next(fetched)
            for ref in object_refs
        ]
    if _local_without_ray():
        return _get_without_ray(object_refs)
    return RAY_OWN["get"](object_refs, *args, **kwargs)


def _get_without_ray(object_refs: Any) -> Any:
    """Ray's checks and messages for what ``ray.get`` cannot take; no cluster starts."""
    if isinstance(object_refs, ray.ObjectRefGenerator):
        return object_refs  # as Ray does
    if not isinstance(object_refs, list):
        msg = (
            f"Invalid type of object refs, {type(object_refs)}, is given. "
            "'object_refs' must either be an ObjectRef or a list of ObjectRefs. "
        )
        raise ValueError(msg)  # noqa: TRY004 -- Ray's own exception type here
    for ref in object_refs:
        if not isinstance(ref, ray.ObjectRef):
            msg = f"Attempting to call `get` on the value {ref}, which is not an ray.ObjectRef."
            raise TypeError(msg)
    return [ref.local_get() for ref in object_refs]  # all local: non-local refs need a cluster


def _check_waitables(waitables: Any, num_returns: int, timeout: float | None) -> None:
    """Ray's checks on ``ray.wait``'s arguments, in Ray's order, with Ray's messages."""
    if isinstance(waitables, ray.ObjectRef | ray.ObjectRefGenerator):
        msg = (
            "wait() expected a list of ray.ObjectRef or ray.ObjectRefGenerator, got a single "
            f"ray.ObjectRef or ray.ObjectRefGenerator {waitables}"
        )
        raise TypeError(msg)
    if not isinstance(waitables, list):
        msg = (
            "wait() expected a list of ray.ObjectRef or ray.ObjectRefGenerator, "
            f"got {type(waitables)}"
        )
        raise TypeError(msg)
    if timeout is not None and timeout < 0:
        msg = f"The 'timeout' argument must be nonnegative. Received {timeout}"
        raise ValueError(msg)
    for waitable in waitables:
        if not isinstance(waitable, ray.ObjectRef | ray.ObjectRefGenerator):
            msg = (
                "wait() expected a list of ray.ObjectRef or ray.ObjectRefGenerator, "
                f"got list containing {type(waitable)}"
            )
            raise TypeError(msg)
    if not waitables:
        return
    if len(waitables) != len(set(waitables)):
        msg = "Wait requires a list of unique ray_waitables."
        raise ValueError(msg)
    if num_returns <= 0:
        msg = f"Invalid number of objects to return {num_returns}."
        raise ValueError(msg)
    if num_returns > len(waitables):
        msg = "num_returns cannot be greater than the number of ray_waitables provided to ray.wait."
        raise ValueError(msg)


def _is_local(waitable: Any) -> bool:
    return type(waitable) is LocalRef or isinstance(waitable, LocalRefGenerator)


def _local_ready(waitable: Any) -> bool:
    if isinstance(waitable, LocalRefGenerator):
        return True  # its next item is produced on demand
    return bool(waitable.local_ready())


def _wait(ray_waitables: Any, *args: Any, **kwargs: Any) -> Any:
    has_local = isinstance(ray_waitables, list) and any(_is_local(w) for w in ray_waitables)
    if not has_local and not _local_without_ray():
        return RAY_OWN["wait"](ray_waitables, *args, **kwargs)
    num_returns = kwargs.get("num_returns", args[0] if args else 1)
    timeout = kwargs.get("timeout", args[1] if len(args) > 1 else None)
    _check_waitables(ray_waitables, num_returns, timeout)
    if not ray_waitables:
        return [], []
    ready = [w for w in ray_waitables if _is_local(w) and _local_ready(w)][:num_returns]
    pending = [w for w in ray_waitables if type(w) is LocalRef and not w.local_ready()]
    real = [w for w in ray_waitables if not _is_local(w)]
    if len(ready) < num_returns and real:
        more, _ = RAY_OWN["wait"](
            real,
            num_returns=min(len(real), num_returns - len(ready)),
            timeout=timeout,
            fetch_local=kwargs.get("fetch_local", True),
        )
        ready += more
    if len(ready) < num_returns and pending:
        ready += _wait_pending(pending, num_returns - len(ready), timeout)
    chosen = {id(w) for w in ready}
    return (
        [w for w in ray_waitables if id(w) in chosen],
        [w for w in ray_waitables if id(w) not in chosen],
    )


def _wait_pending(pending: list[LocalRef], wanted: int, timeout: float | None) -> list[LocalRef]:
    """Wait for up to ``wanted`` pending local refs (async actor calls) to finish."""
    import concurrent.futures  # noqa: PLC0415 -- only pending refs need it

    futures = {ref.local_pending: ref for ref in pending if ref.local_pending is not None}
    done: list[LocalRef] = []
    try:
        for finished in concurrent.futures.as_completed(futures, timeout=timeout):
            done.append(futures[finished])
            if len(done) == wanted:
                break
    except concurrent.futures.TimeoutError:
        pass
    return done


def _put(value: Any, *args: Any, **kwargs: Any) -> Any:
    if not _local_without_ray():
        return RAY_OWN["put"](value, *args, **kwargs)
    if isinstance(value, ray.ObjectRef):  # Ray's checks and messages
        msg = (
            "Calling 'put' on an ray.ObjectRef is not allowed. If you really want to do "
            "this, you can wrap the ray.ObjectRef in a list and call 'put' on it."
        )
        raise TypeError(msg)
    try:
        return refs.frozen_ref(value)
    except Exception as exc:
        msg = f"Could not serialize the put value {value!r}:\n{exc}"
        raise TypeError(msg) from exc


def _kill(actor: Any, *args: Any, **kwargs: Any) -> Any:
    if handles.kill(actor):
        return None
    if _local_without_ray():  # Ray's check, without starting a cluster to make it
        msg = (
            "ray.kill() only supported for actors. For tasks, try ray.cancel(). "
            f"Got: {type(actor)}."
        )
        raise ValueError(msg)
    return RAY_OWN["kill"](actor, *args, **kwargs)


def _get_actor(name: str, namespace: str | None = None, *args: Any, **kwargs: Any) -> Any:
    handle = handles.get_actor(name, namespace)
    if handle is not None:
        return handle
    if not ray.is_initialized():
        msg = (
            f"Failed to look up actor with name {name!r}: no local actor has that name, "
            "and Ray is not initialized."
        )
        raise ValueError(msg)
    return RAY_OWN["get_actor"](name, namespace, *args, **kwargs)


def _cancel(ray_waitable: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(ray_waitable, LocalRefGenerator):
        ray_waitable.close()  # the generator stops; refs already taken keep their values
        return None
    if type(ray_waitable) is LocalRef:
        future = ray_waitable.local_pending
        if future is not None and not future.done():
            cancel_call = getattr(future, "cancel_call", None)  # an async actor's call
            if cancel_call is not None:
                if kwargs.get("force") or (args and args[0]):
                    msg = "force=True is not supported for actor tasks."  # Ray's ValueError
                    raise ValueError(msg)
                cancel_call()
        return None  # a finished call: nothing to cancel, as in Ray
    if _local_without_ray():
        msg = (
            "ray.cancel() only supported for object refs. "
            f"For actors, try ray.kill(). Got: {type(ray_waitable)}."
        )
        raise TypeError(msg)
    return RAY_OWN["cancel"](ray_waitable, *args, **kwargs)


def _in_local_call() -> Any:
    call = CURRENT_CALL.get()
    return call if call is not None and call.mode == "local" else None


def _get_runtime_context(*args: Any, **kwargs: Any) -> Any:
    call = _in_local_call()
    if call is not None or _local_without_ray():
        return LocalRuntimeContext(call)
    return RAY_OWN["get_runtime_context"](*args, **kwargs)


def _get_gpu_ids(*args: Any, **kwargs: Any) -> Any:
    if _in_local_call() is not None or _local_without_ray():
        return []  # a local call is assigned no GPU
    return RAY_OWN["get_gpu_ids"](*args, **kwargs)


def _cluster_resources(*args: Any, **kwargs: Any) -> Any:
    if _local_without_ray():  # as a one-node cluster of this machine would answer
        return dict(_ray_compat.machine_resources())
    return RAY_OWN["cluster_resources"](*args, **kwargs)


def _available_resources(*args: Any, **kwargs: Any) -> Any:
    if _local_without_ray():  # local calls hold no resources: all of them are free
        return dict(_ray_compat.machine_resources())
    return RAY_OWN["available_resources"](*args, **kwargs)


def _exit_actor(*args: Any, **kwargs: Any) -> Any:
    if local_actor.exit_actor():  # raises inside a local actor's call
        return None
    return RAY_OWN["exit_actor"](*args, **kwargs)


def _list_named_actors(all_namespaces: bool = False, *args: Any, **kwargs: Any) -> Any:
    local = local_actor.named_actors(all_namespaces)
    if not ray.is_initialized():
        return local
    return local + RAY_OWN["list_named_actors"](all_namespaces, *args, **kwargs)


def _plain_call(kind: str, name: str) -> None:
    """A plain Ray call made in local mode: warn once per function, or raise (strict)."""
    config = setting.current()
    if not config.enabled:
        return
    would = "would start" if config.strict else "starts"  # strict: nothing is started
    starts = "" if ray.is_initialized() else f" Ray is not initialized, so this {would} a cluster."
    msg = (
        f"{name} is a plain @ray.remote {kind}, called in local mode: it does not run "
        f"locally but on Ray.{starts} Decorate it with @debuggable so it runs here too, "
        "or call it outside local mode."
    )
    if config.strict:
        raise LocalModeError(msg + " (local_mode(strict=True) makes this an error.)")
    state = local_state.state
    if name not in state.warned:
        state.warned.add(name)
        writer.warn(msg, stacklevel=5)


def _hook_submission(original: Callable[..., Any], kind: str | None) -> Callable[..., Any]:
    """``RemoteFunction._remote``/``ActorClass._remote``/``ActorMethod._remote``, hooked."""

    def submit(self: Any, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        if kind is not None and _ray_compat.is_taken(self):  # instrument() sends it on
            return original(self, args, kwargs, **options)
        if kind is not None and not _ray_compat.is_kit_remote(self):
            _plain_call(kind, _ray_compat.remote_name(self))
        if args or kwargs:
            args, kwargs = refs.to_ray(tuple(args or ()), dict(kwargs or {}))
        return original(self, args, kwargs, **options)

    return functools.wraps(original)(submit)


_HOOKS: dict[str, Callable[..., Any]] = {
    "get": _get,
    "wait": _wait,
    "put": _put,
    "kill": _kill,
    "get_actor": _get_actor,
    "cancel": _cancel,
    "get_runtime_context": _get_runtime_context,
    "get_gpu_ids": _get_gpu_ids,
    "cluster_resources": _cluster_resources,
    "available_resources": _available_resources,
    "actor.exit_actor": _exit_actor,
    "util.list_named_actors": _list_named_actors,
}

_SUBMISSIONS = {
    "remote_function.RemoteFunction._remote": "task",
    "actor.ActorClass._remote": "actor class",
    "actor.ActorMethod._remote": None,  # calls of existing actors: refs converted only
}


def _ours_to_wrap(current: Any, original: Any) -> bool:
    """Ray's own function, or one of the kit's other patches (instrument()'s): wrapped."""
    return current is original or _ray_compat.is_kit_patch(current)


def activate() -> None:
    """Install the hooks and enable local routing (idempotent, cheap when done).

    The hooks keep the name, docs and signature of Ray's functions. A function someone
    else wrapped already is left alone. A reset (``raytrace_kit.testing.reset()``) removes them.
    """
    state = local_state.state
    if state.active:
        return
    with state.lock:
        for dotted, hook in _HOOKS.items():
            owner, attribute = _ray_compat.attribute_owner(dotted)
            original = RAY_OWN.setdefault(attribute, getattr(owner, attribute))
            if not _ours_to_wrap(getattr(owner, attribute), original):
                continue  # someone else wrapped it: leave theirs alone
            _ray_compat.patch(dotted, owner, attribute, functools.wraps(original)(hook))
        for dotted, kind in _SUBMISSIONS.items():
            owner, attribute = _ray_compat.attribute_owner(dotted)
            original = RAY_OWN.setdefault(dotted, getattr(owner, attribute))
            current = getattr(owner, attribute)
            if not _ours_to_wrap(current, original):
                continue
            _ray_compat.patch(dotted, owner, attribute, _hook_submission(current, kind))
        state.active = True

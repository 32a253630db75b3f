"""The ``ray.*`` hooks of local mode: ``get``, ``wait``, ``put``, ``kill``, ``get_actor``.

Installed on first use of local mode (:func:`activate`), so that user code does not change.
The hooks hand everything that is not local to Ray's own functions untouched.
"""

from __future__ import annotations

import functools
from typing import Any

import ray

from raytrace_kit import _process
from raytrace_kit._local import actors, mode, refs
from raytrace_kit._local.refs import RAY, LocalRef

__all__ = ["activate"]


def _get(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
    if isinstance(object_refs, LocalRef):
        return object_refs._get()
    if isinstance(object_refs, list | tuple) and any(
        isinstance(ref, LocalRef) for ref in object_refs
    ):
        real = [ref for ref in object_refs if not isinstance(ref, LocalRef)]
        fetched = iter(RAY["get"](real, *args, **kwargs) if real else [])
        return [ref._get() if isinstance(ref, LocalRef) else next(fetched) for ref in object_refs]
    return RAY["get"](object_refs, *args, **kwargs)


def _wait(object_refs: Any, *args: Any, **kwargs: Any) -> Any:
    if not isinstance(object_refs, list | tuple) or not any(
        isinstance(ref, LocalRef) for ref in object_refs
    ):
        return RAY["wait"](object_refs, *args, **kwargs)
    num_returns = kwargs.get("num_returns", args[0] if args else 1)
    # Ray's checks, in Ray's order, with Ray's messages.
    if len(object_refs) != len({id(ref) for ref in object_refs}):
        msg = "Wait requires a list of unique ray_waitables."
        raise ValueError(msg)
    if num_returns <= 0:
        msg = f"Invalid number of objects to return {num_returns}."
        raise ValueError(msg)
    if num_returns > len(object_refs):
        msg = "num_returns cannot be greater than the number of ray_waitables provided to ray.wait."
        raise ValueError(msg)
    # Local calls finished when they were submitted: local refs are always ready.
    ready = [ref for ref in object_refs if isinstance(ref, LocalRef)][:num_returns]
    real = [ref for ref in object_refs if not isinstance(ref, LocalRef)]
    if len(ready) < num_returns and real:
        more, _ = RAY["wait"](
            real,
            num_returns=num_returns - len(ready),
            timeout=kwargs.get("timeout"),
            fetch_local=kwargs.get("fetch_local", True),
        )
        ready += more
    chosen = {id(ref) for ref in ready}
    return (
        [ref for ref in object_refs if id(ref) in chosen],
        [ref for ref in object_refs if id(ref) not in chosen],
    )


def _put(value: Any, *args: Any, **kwargs: Any) -> Any:
    if not ray.is_initialized() and mode.is_local_mode():
        return refs.value_ref(value, copy=True, function="ray.put")
    return RAY["put"](value, *args, **kwargs)


def _kill(actor: Any, *args: Any, **kwargs: Any) -> Any:
    if actors.kill(actor):
        return None
    return RAY["kill"](actor, *args, **kwargs)


def _get_actor(name: str, namespace: str | None = None, *args: Any, **kwargs: Any) -> Any:
    handle = actors.get_actor(name, namespace)
    if handle is not None:
        return handle
    if not ray.is_initialized():
        msg = (
            f"Failed to look up actor with name {name!r}: no local actor has that name, "
            "and Ray is not initialized."
        )
        raise ValueError(msg)
    return RAY["get_actor"](name, namespace, *args, **kwargs)


_HOOKS = {"get": _get, "wait": _wait, "put": _put, "kill": _kill, "get_actor": _get_actor}


def activate() -> None:
    """Install the ``ray.*`` hooks and enable local routing (idempotent, cheap when done).

    The hooks keep the name, docs and signature of Ray's functions. A function someone
    else wrapped already is left alone. :func:`raytrace_kit._process.reset` removes them.
    """
    state = _process.state
    if state.local_active:
        return
    with state.lock:
        for name, hook in _HOOKS.items():
            original = RAY[name]
            if getattr(ray, name) is not original:
                continue  # someone else wrapped it: leave theirs alone
            installed = functools.wraps(original)(hook)
            setattr(ray, name, installed)
            state.ray_hooks[name] = (original, installed)
        state.local_active = True

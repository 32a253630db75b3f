"""The kit's patches of Ray's functions, and its mark on its own remotes: set, found, undone.

Local mode, ``instrument()``, the driver's record and the parents hook replace a few of
Ray's functions (``ray.get``, ``RemoteFunction._remote``...); each replacement is recorded
here under a key, so that one reset puts every original back. The attributes themselves
are named by the modules that patch them; what they read of Ray is in
:mod:`raytrace_kit._ray_compat`, which re-exports these names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import ray

from raytrace_kit import _registry

__all__ = [
    "RAY_OWN",
    "TAKEN",
    "attribute_owner",
    "is_kit_patch",
    "is_kit_remote",
    "is_taken",
    "mark_kit_remote",
    "patch",
    "patched",
]

# Set on the RemoteFunction/ActorClass objects raytrace_kit itself submits through, so
# that local mode tells the kit's own submissions from the user's plain @ray.remote calls.
_R = TypeVar("_R")
_KIT_MARK = "__raytrace_kit__"


def mark_kit_remote(remote: _R) -> _R:
    """Mark a Ray remote function or actor class as the kit's own (not a plain call)."""
    setattr(remote, _KIT_MARK, True)
    return remote


def is_kit_remote(remote: Any) -> bool:
    """Whether ``remote`` (or the object it was made from by ``.options()``) is the kit's."""
    return bool(getattr(remote, _KIT_MARK, False))


# Whether a plain remote function or actor class is sent through a proxy by instrument()
# when it is submitted: set by instrument(), read by local mode (which then neither warns
# about it as a plain call nor converts its arguments).
TAKEN: list[Callable[[Any], bool]] = []


def is_taken(remote: Any) -> bool:
    """Whether instrument() takes the calls of ``remote`` (a plain Ray object)."""
    return bool(TAKEN) and TAKEN[0](remote)


# Ray's own functions, as they were before any hook of the kit's replaced them: by name
# under ``ray`` (``get``, ``actor.exit_actor`` ...). Local mode calls these for what is not
# local; the hooks fill in the rest as they are installed.
RAY_OWN: dict[str, Callable[..., Any]] = {
    "get": ray.get,
    "wait": ray.wait,
    "put": ray.put,
    "kill": ray.kill,
    "get_actor": ray.get_actor,
    "cancel": ray.cancel,
    "get_runtime_context": ray.get_runtime_context,
    "get_gpu_ids": ray.get_gpu_ids,
}
# The kit's patches in force: key -> (owner, attribute, Ray's own, ours). The key is the
# dotted name under ``ray``, with a ``#suffix`` where two hooks share one attribute.
_PATCHES: dict[str, tuple[Any, str, Callable[..., Any], Callable[..., Any]]] = {}


def attribute_owner(dotted: str) -> tuple[Any, str]:
    """The object that holds ``ray.<dotted>``, and the attribute's name (``#suffix`` cut)."""
    path, _, attribute = dotted.partition("#")[0].rpartition(".")
    owner: Any = ray
    for part in filter(None, path.split(".")):
        owner = getattr(owner, part)
    return owner, attribute


def patched(key: str) -> bool:
    """Whether the kit's patch named ``key`` is in force."""
    return key in _PATCHES


def is_kit_patch(value: object) -> bool:
    """Whether ``value`` is one of the kit's patches in force (another may stack on it)."""
    return any(entry[3] is value for entry in _PATCHES.values())


def patch(key: str, owner: Any, attribute: str, ours: Callable[..., Any]) -> None:
    """Put ``ours`` in place of ``owner.attribute``; :func:`unpatch_all` puts Ray's back."""
    _PATCHES[key] = (owner, attribute, getattr(owner, attribute), ours)
    setattr(owner, attribute, ours)


def _unpatch_all() -> None:
    """Put back Ray's own where the kit's patches are still in place (for tests)."""
    TAKEN.clear()
    # Newest first: two patches of one attribute unwind to Ray's own.
    for owner, attribute, original, ours in reversed(_PATCHES.values()):
        if getattr(owner, attribute, None) is ours:
            setattr(owner, attribute, original)
    _PATCHES.clear()


# Patches outlive a fork (what the program configured stays configured).
_registry.register(_unpatch_all, layer=_registry.PROCESS)

"""The owners of process state: each room's reset, after-fork handler and caches, run as one.

Every room that keeps mutable state for this process (``_process``, ``_ray_compat``'s
patches, ``_output``, ``_serialization``, ``_worker``, ``_local``, the driver's caches) owns
it, in a module of its own, and registers here how to forget it (:func:`reset`, for tests:
``raytrace_kit.testing.reset()``) and what a forked child must renew. This module knows
none of them, so the bottom layer knows nothing of the rooms above it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Protocol, TypeVar

__all__ = ["LOCAL", "OUTPUT", "PROCESS", "WORKER", "cleared_on_reset", "register", "reset"]


class _Cache(Protocol):
    def cache_clear(self) -> None: ...


_C = TypeVar("_C", bound=_Cache)

# Appended to at import of each owner, never rebound: the lists are the registry.
_RESETS: list[tuple[int, Callable[[], None]]] = []
_AFTER_FORK: list[Callable[[], None]] = []

# Layers, bottom to top: an owner resets after every owner above it (local actors end
# before the event files they write to are closed), whatever order they were imported in.
PROCESS, OUTPUT, WORKER, LOCAL = 0, 1, 2, 3


def register(
    reset: Callable[[], None],
    after_fork: Callable[[], None] | None = None,
    *,
    layer: int,
) -> None:
    """Register an owner of state: ``reset`` forgets it, ``after_fork`` renews it in a child.

    Owners reset from the top layer down, and renew after a fork in the order they were
    registered (each renews only its own state).
    """
    _RESETS.append((layer, reset))
    if after_fork is not None:
        _AFTER_FORK.append(after_fork)


def cleared_on_reset(cache: _C) -> _C:
    """Register a ``functools`` cache to be cleared by :func:`reset` (a decorator)."""
    _RESETS.append((PROCESS, cache.cache_clear))
    return cache


def reset() -> None:
    """Close files, remove hooks, stop helpers and forget every cached value (for tests)."""
    for _, forget in sorted(_RESETS, key=lambda entry: -entry[0]):  # stable: top layer first
        forget()


def _after_fork_in_child() -> None:
    """Give a forked child new ids, new files and fresh locks (the parent keeps its own)."""
    for renew in _AFTER_FORK:
        renew()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

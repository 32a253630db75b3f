"""What local mode keeps for this process: its setting, its actors and their loops.

Registered with :mod:`raytrace_kit._registry`: a reset ends every local actor (its calls
then fail as a dead actor's) and stops their loops; a forked child keeps what the program
configured (the setting, the actors it can name) but not the loop threads, which do not
survive a fork, and draws new ref ids.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from typing import TYPE_CHECKING, Any

from ray.exceptions import ActorDiedError

from raytrace_kit import _registry

if TYPE_CHECKING:
    import asyncio

    from raytrace_kit._local.setting import LocalConfig

__all__ = ["LocalState", "state"]


class LocalState:
    """Every mutable value of local mode; see the module's docstring."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        """Forget every value (the caller ends actors and loops first)."""
        self.setting: LocalConfig | None = None  # process-wide; None: off (see .setting)
        self.active = False  # False until local mode is first used (hooks installed)
        # (name, namespace) -> actor. Weak, as in Ray: a named actor ends with its last
        # handle, unless detached (those are kept alive in `detached`).
        self.actors: weakref.WeakValueDictionary[tuple[str, str | None], Any] = (
            weakref.WeakValueDictionary()
        )
        self.detached: list[Any] = []
        # Every live local actor by id (weak: an actor lives while a handle does).
        self.actors_by_id: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self.loops: list[asyncio.AbstractEventLoop] = []  # one per async local actor
        self.warned: set[str] = set()  # plain Ray calls warned about in local mode
        self.pickled_refs: dict[bytes, Any] = {}  # by id: refs pickled out of band
        self.new_ids()

    def new_ids(self) -> None:
        """Local refs' ids: a prefix drawn per process (again after a fork) + a counter."""
        self.id_prefix = os.urandom(20)
        self.id_counter = itertools.count()

    def reset(self) -> None:
        """End every local actor and stop their loops, then forget everything."""
        with self.lock:
            for actor in list(self.actors_by_id.values()):
                actor.dead = ActorDiedError()
            for loop in self.loops:
                if not loop.is_closed():
                    loop.call_soon_threadsafe(loop.stop)
            self.clear()

    def after_fork(self) -> None:
        """A forked child: the program's setting and actors stay; loops and warnings go."""
        self.lock = threading.Lock()
        self.loops = []
        self.warned = set()
        self.new_ids()


state = LocalState()
_registry.register(state.reset, state.after_fork, layer=_registry.LOCAL)

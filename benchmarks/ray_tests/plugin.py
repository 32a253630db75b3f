"""pytest plugin: every remote function and actor class the test files make is debuggable.

Loaded with ``-p plugin`` (compare.py puts this folder on ``PYTHONPATH``). For the session
it replaces the public ``ray.remote`` with a function that first calls Ray's own, so Ray
builds, validates and refuses exactly as it does plain (``@ray.remote``,
``@ray.remote(**options)``, ``ray.remote(fn)``), then, when the call came from a test file
(``test_*.py`` in the rootdir), passes the remote function or actor class Ray made through
``raytrace_kit.debuggable``. What the kit refuses (``InvalidTargetError``) stays Ray's.

Left as Ray's: remote functions and actors made by helpers outside the test files (Ray's
``SignalActor``, ``client_test_utils``), and those made inside tasks and actors, since
workers do not load pytest plugins. The kit itself makes its remotes through
``raytrace_kit._ray_compat.ray_remote`` (Ray's own, bound at import), never through the
public name replaced here.

The session ends with one line that compare.py reads: how many of each were wrapped.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import ray
from ray.actor import ActorClass
from ray.remote_function import RemoteFunction

from raytrace_kit import debuggable
from raytrace_kit.exceptions import InvalidTargetError

SUMMARY_PREFIX = "raytrace_kit plugin:"


class KitRemote:
    """Stands in for ``ray.remote``: Ray's result, made debuggable for the test files."""

    def __init__(self, ray_remote: Any, rootdir: Path) -> None:
        functools.update_wrapper(self, ray_remote)
        self.ray_remote = ray_remote
        self.rootdir = rootdir.resolve()
        self.tally: Counter[str] = Counter()
        self._in_scope: dict[str, bool] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        made = self.ray_remote(*args, **kwargs)  # Ray's checks and errors, unchanged
        caller = sys._getframe(1)
        if not self._from_test_file(caller):
            where = Path(caller.f_code.co_filename).name
            self.tally[f"left as Ray's (made in {where})"] += 1
            return made
        if args:  # @ray.remote or ray.remote(fn): Ray's remote function or actor class
            return self._wrap(made)
        # @ray.remote(**options): Ray's decorator; the kit wraps what it makes.
        return lambda target: self._wrap(made(target))

    def _from_test_file(self, frame: FrameType) -> bool:
        filename = frame.f_code.co_filename
        if filename not in self._in_scope:
            path = Path(filename).resolve()
            self._in_scope[filename] = path.parent == self.rootdir and path.name.startswith("test_")
        return self._in_scope[filename]

    def _wrap(self, made: Any) -> Any:
        if isinstance(made, RemoteFunction):
            kind = "remote functions"
        elif isinstance(made, ActorClass):
            kind = "actor classes"
        else:
            return made
        try:
            wrapped = debuggable(made)
        except InvalidTargetError:
            self.tally[f"{kind} the kit refused (left as Ray's)"] += 1
            return made
        self.tally[f"{kind} made debuggable"] += 1
        return wrapped


_KEY = pytest.StashKey[KitRemote]()


def pytest_configure(config: pytest.Config) -> None:
    kit_remote = KitRemote(ray.remote, config.rootpath)
    config.stash[_KEY] = kit_remote
    ray.remote = kit_remote


def pytest_unconfigure(config: pytest.Config) -> None:
    kit_remote = config.stash.get(_KEY, None)
    if kit_remote is not None:
        ray.remote = kit_remote.ray_remote


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    tally = config.stash[_KEY].tally
    counts = ", ".join(f"{count} {what}" for what, count in sorted(tally.items())) or "nothing"
    terminalreporter.write_line(f"{SUMMARY_PREFIX} {counts}")

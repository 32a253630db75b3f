"""A kept call run again in this process, in local mode: its inputs unpickled, its actor rebuilt.

The replay file (:mod:`raytrace_kit._output.replay_file`) is read only once it is found
private; its code is unpickled with the run's import path in reach, an actor's instance
is rebuilt from its class and state as pickle rebuilds one, and the call runs in local
mode, so the calls it makes run here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from raytrace_kit._local.switch import local_mode
from raytrace_kit._output import replay_file
from raytrace_kit.exceptions import ReplayError

__all__ = ["Kept", "call", "importable", "load", "restore"]

_POST_MORTEM = "with raytrace_kit.local_mode(post_mortem=True):"


@dataclass(frozen=True)
class Kept:
    """A failed call's inputs, unpickled: what :func:`call` runs again.

    Attributes:
        header: The file's header: the function, the run's cwd and sys.path.
        function: The user's function (for a method: the function in the class).
        args: Its positional arguments (without the instance).
        kwargs: Its keyword arguments.
        instance: The actor's instance rebuilt from its state, for a method; else ``None``.
    """

    header: dict[str, Any]
    function: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    instance: Any = None


def load(path: os.PathLike[str] | str) -> Kept:
    """Read and unpickle a replay file (which runs code: only a private file is read).

    Call it with the run's import path in place (:func:`importable`): the user's code is
    imported as it was pickled, by module name, unless it came from ``__main__``.

    Raises:
        UnsafeReplayFileError: The file is not yours, or others may read or write it.
        ReplayError: An actor method whose actor's state was not kept.
        InvalidValueError: It is not a replay file.
    """
    import ray.cloudpickle  # noqa: PLC0415 -- Ray loads only to replay

    header, payload = replay_file.read(path)
    missing = header.get("actor_state_missing")
    if header.get("method") and missing:
        msg = (
            f"{header.get('function')}: the actor's state was not kept ({missing}), and the "
            "method cannot run without its actor. Run the actor in this process instead, "
            f"where pdb stops at the failing line: `{_POST_MORTEM}` around the calls."
        )
        raise ReplayError(msg)
    inputs = ray.cloudpickle.loads(payload)
    instance = None
    if header.get("method"):
        instance = restore(inputs["actor_class"], inputs["actor_state"])
    return Kept(header, inputs["function"], tuple(inputs["args"]), inputs["kwargs"], instance)


def restore(cls: type[Any], state: Any) -> Any:
    """An instance of ``cls`` with ``state``, as pickle rebuilds one (no ``__init__`` run)."""
    instance = cast(Any, cls).__new__(cls)  # as pickle makes it: no __init__
    setstate = getattr(instance, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return instance
    slots = None
    if isinstance(state, tuple) and len(state) == 2:  # (its dict, its slots)
        state, slots = state
    if state:
        vars(instance).update(state)
    for name, value in (slots or {}).items():
        setattr(instance, name, value)
    return instance


@contextlib.contextmanager
def importable(entries: list[str], *, first: bool = False) -> Iterator[None]:
    """The run's ``sys.path`` entries in reach while inside; those added are removed after.

    ``first``: put them ahead of this process's own (a process of its own for the
    replay: the run's order wins); else after them (a notebook's modules stay its own).
    """
    missing = [entry for entry in entries if entry not in sys.path]
    if first:
        sys.path[:0] = missing
    else:
        sys.path.extend(missing)
    try:
        yield
    finally:
        for entry in missing:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)


def call(kept: Kept) -> Any:
    """Run the kept call again, in local mode; return its result or raise its exception.

    A coroutine is run to its end (``asyncio.run``), a generator is exhausted: a failure
    at its third item raises as it did.
    """
    args = kept.args if kept.instance is None else (kept.instance, *kept.args)
    with local_mode():
        result = kept.function(*args, **kept.kwargs)
        if inspect.iscoroutine(result):
            return asyncio.run(result)
        if inspect.isgenerator(result):
            return list(result)
        if inspect.isasyncgen(result):
            return asyncio.run(_collect(result))
    return result


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]

"""Async actors and generators in local mode against plain Ray: the same outcome.

Each row runs with plain Ray (the shared cluster, all rows first) and then in strict local
mode with Ray shut down, as users run it: a value, or where an exception came and its type
and first line, must be equal, and local mode must not have started a cluster.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import ray

from tests.helpers import AgainstPlainRay, Body, Remote, add, outcome_without_ids

# --- what the rows call (module level, so that Ray's workers can import them) ---


def numbers(n: int) -> Iterator[int]:
    for i in range(n):  # noqa: UP028 -- `yield from range(n)` fails in Ray (it send()s)
        yield i


def fails_after_one() -> Iterator[int]:
    yield 1
    raise ValueError("boom after one item")


def handshake(path: str) -> Iterator[str]:
    """Yields once, then waits for the consumer to answer through a file."""
    yield "first"
    deadline = time.monotonic() + 20
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError("the consumer never answered: the generator did not stream")
        time.sleep(0.01)
    yield "second"


class Gate:
    """An async actor: one call waits for a later one."""

    def __init__(self) -> None:
        self.opened: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self.opened is None:
            self.opened = asyncio.Event()
        return self.opened

    async def wait(self) -> str:
        await asyncio.wait_for(self._event().wait(), 20)
        return "opened"

    async def open(self) -> str:
        self._event().set()
        return "set"

    async def through_self(self) -> str:
        me = ray.get_runtime_context().current_actor
        return "got " + await me.open.remote()

    async def await_ref(self, refs: list[Any]) -> int:
        return await refs[0]  # type: ignore[no-any-return]

    async def slow(self) -> str:
        self._event().set()  # started: began() returns (a barrier, not a guess of time)
        await asyncio.sleep(20)
        return "finished"

    async def began(self) -> bool:
        await asyncio.wait_for(self._event().wait(), 20)
        return True


class OneAtATime:
    """An async actor limited to one call at a time."""

    def __init__(self) -> None:
        self.log: list[str] = []

    async def work(self, name: str) -> list[str]:
        self.log.append(f"start {name}")
        await asyncio.sleep(0.2)
        self.log.append(f"end {name}")
        return self.log


# --- the rows: each takes `remote` (ray.remote, or debuggable(ray.remote(...))) ---


def await_ref_in_async_actor(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    ref = gate.await_ref.remote([remote(add).remote(20, 22)])
    return lambda: ray.get(ref, timeout=30)


def async_call_waits_for_a_later_call(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    waiting = gate.wait.remote()
    opening = gate.open.remote()
    return lambda: ray.get([waiting, opening], timeout=30)


def async_call_awaits_its_own_actor(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    ref = gate.through_self.remote()
    return lambda: ray.get(ref, timeout=30)


def generator_is_an_object_ref_generator(remote: Remote) -> Body:
    refs = remote(numbers).remote(3)
    return lambda: (isinstance(refs, ray.ObjectRefGenerator), [ray.get(r) for r in refs])


def generator_streams(remote: Remote, tmp: Path) -> Body:
    answer = tmp / "answer"
    refs = remote(handshake).remote(str(answer))
    first = ray.get(next(refs), timeout=30)
    answer.write_text("go")
    return lambda: (first, ray.get(next(refs), timeout=30))


def generator_fails_midway(remote: Remote) -> Body:
    refs = remote(fails_after_one).remote()
    return lambda: [outcome_without_ids(lambda r=r: lambda: ray.get(r)) for r in refs]


def cancel_a_running_async_call(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    ref = gate.slow.remote()
    assert ray.get(gate.began.remote(), timeout=60)  # running now, however busy the machine
    ray.cancel(ref)
    return lambda: ray.get(ref, timeout=30)


def a_cancelled_call_raises_what_ray_raises(remote: Remote) -> Body:
    """Both a RayTaskError and a TaskCancelledError (``except`` either catches it)."""
    gate = remote(Gate).remote()
    ref = gate.slow.remote()
    assert ray.get(gate.began.remote(), timeout=60)
    ray.cancel(ref)

    def body() -> Any:
        try:
            return ray.get(ref, timeout=30)
        except Exception as error:  # what it is, is the outcome
            kinds = (ray.exceptions.RayTaskError, ray.exceptions.TaskCancelledError)
            return [isinstance(error, kind) for kind in kinds]

    return body


def force_cancel_of_an_actor_call(remote: Remote) -> Body:
    """Ray refuses force=True for an actor's call (ValueError), and the call runs on."""
    gate = remote(Gate).remote()
    ref = gate.wait.remote()
    try:
        ray.cancel(ref, force=True)
    except ValueError as refused:
        said = str(refused)
    else:
        said = "accepted"
    ray.get(gate.open.remote(), timeout=30)
    return lambda: (said, ray.get(ref, timeout=30))


def async_actor_max_concurrency_one(remote: Remote) -> Body:
    actor = remote(OneAtATime).options(max_concurrency=1).remote()
    first, second = actor.work.remote("a"), actor.work.remote("b")

    def body() -> Any:
        log = max(ray.get([first, second], timeout=30), key=len)
        # One at a time: each start is followed by its own end (in whichever order Ray
        # picked: it does not promise submission order for async actors).
        names = [entry.split()[1] for entry in log]
        return len(log), all(names[i] == names[i + 1] for i in range(0, len(names), 2))

    return body


def get_of_a_list_times_out_as_a_whole(remote: Remote) -> Body:
    gate = remote(Gate).remote()
    refs = [gate.wait.remote() for _ in range(10)]

    def body() -> Any:
        # One deadline for the list: about 0.5 s where a deadline per ref would be 5 s; the
        # margin between the two holds on a busy machine.
        started = time.monotonic()
        try:
            ray.get(refs, timeout=0.5)
        except ray.exceptions.GetTimeoutError:
            return time.monotonic() - started < 2.5
        return None

    return body


class TestWithRayShutDown(AgainstPlainRay):
    """Each row with plain Ray first, then in strict local mode with Ray shut down."""

    ROWS: ClassVar[list[Callable[..., Body]]] = [
        await_ref_in_async_actor,
        async_call_waits_for_a_later_call,
        async_call_awaits_its_own_actor,
        generator_is_an_object_ref_generator,
        generator_streams,
        generator_fails_midway,
        cancel_a_running_async_call,
        a_cancelled_call_raises_what_ray_raises,
        force_cancel_of_an_actor_call,
        async_actor_max_concurrency_one,
        get_of_a_list_times_out_as_a_whole,
    ]

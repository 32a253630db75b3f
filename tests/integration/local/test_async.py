"""Async actors and generators in local mode, and the ids of calls made on their loops.

Each async actor has a loop of its own, on its own thread; a generator runs as its caller
iterates. Run without Ray, as users run local mode.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from ray.exceptions import ActorDiedError, GetTimeoutError

import raytrace_kit
from raytrace_kit import debuggable, local_mode
from tests import helpers
from tests.helpers import events_of

SEEN: list[str] = []


@debuggable
@ray.remote
def produce(n: int) -> Iterator[int]:
    for i in range(n):
        SEEN.append(f"made {i}")
        yield i


@debuggable
@ray.remote
def countdown(n: int, fail_at: int = -1):
    for i in range(n, 0, -1):
        if i == fail_at:
            raise ValueError(f"failed at {i}")
        yield i


@debuggable
@ray.remote
def ids() -> dict[str, Any]:
    context = ray.get_runtime_context()
    return {
        "task_id": context.get_task_id(),
        "job_id": context.get_job_id(),
        "node_id": context.get_node_id(),
        "worker_id": context.get_worker_id(),
    }


@debuggable
@ray.remote
def outer() -> Any:
    gate = Gate.remote()
    opened = gate.open.remote()  # an async actor's call, on its loop
    return ray.get([ids.remote(), opened])


@debuggable
@ray.remote
class Gate:
    def __init__(self) -> None:
        self.opened: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self.opened is None:
            self.opened = asyncio.Event()
        return self.opened

    async def wait(self) -> str:
        await self._event().wait()
        return threading.current_thread().name

    async def open(self) -> str:
        self._event().set()
        return "set"

    async def stream(self, n: int) -> AsyncIterator[int]:
        for i in range(n):
            await asyncio.sleep(0)
            yield i


@debuggable
@ray.remote
class Streamer:
    async def leave_midway(self) -> AsyncIterator[int]:
        yield 1
        ray.actor.exit_actor()
        yield 2  # never reached

    def items(self, n: int) -> Iterator[int]:
        yield from range(n)

    def ping(self) -> str:
        return "pong"

    async def echo(self, value: Any) -> Any:
        return value


@debuggable
@ray.remote
def make_streamer() -> Any:
    return Streamer.remote()


@pytest.mark.usefixtures("no_ray")
class TestAsyncActors:
    """An async actor's calls run on its own loop; killing or leaving ends it, as in Ray."""

    def test_async_calls_interleave_on_the_actors_own_loop(self) -> None:
        """A call that waits for a later one completes; both ran on the actor's loop thread."""
        with local_mode(strict=True):
            gate = Gate.remote()
            waiting = gate.wait.remote()  # pending: it needs open() to run first
            assert ray.wait([waiting], timeout=0.2) == ([], [waiting])
            with pytest.raises(GetTimeoutError):
                ray.get(waiting, timeout=0.2)
            assert ray.get(gate.open.remote(), timeout=30) == "set"
            thread = ray.get(waiting, timeout=30)
        assert thread == "raytrace_kit-local-actor-Gate"
        assert thread != threading.current_thread().name
        assert not ray.is_initialized()

    def test_killing_an_async_actor_fails_its_running_call(self) -> None:
        """ray.kill while a call awaits: its ref raises ActorDiedError, as in Ray."""
        with local_mode(strict=True):
            gate = Gate.remote()
            waiting = gate.wait.remote()
            ray.kill(gate)
            with pytest.raises(ActorDiedError):
                ray.get(waiting, timeout=30)

    def test_handle_returned_by_a_task_keeps_its_actor_alive(self) -> None:
        """A handle that lives only inside a result still reaches its actor, as in Ray."""
        with local_mode(strict=True):
            handle = ray.get(make_streamer.remote())
            gc.collect()
            assert ray.get(handle.ping.remote()) == "pong"

    def test_exit_actor_in_an_async_generator_ends_the_actor_not_the_loop(self) -> None:
        """The next ref raises ActorDiedError; later calls too; nothing hangs."""
        with local_mode(strict=True):
            streamer = Streamer.remote()
            refs = streamer.leave_midway.remote()
            assert ray.get(next(refs), timeout=30) == 1
            with pytest.raises(ActorDiedError):
                ray.get(next(refs), timeout=30)
            with pytest.raises(ActorDiedError):
                ray.get(streamer.echo.remote(1), timeout=30)

    def test_async_call_arguments_are_copied_at_remote(self) -> None:
        """A mutation after .remote() does not reach the call; bad values fail at .remote()."""
        with local_mode(strict=True):
            streamer = Streamer.remote()
            data = [1, 2]
            ref = streamer.echo.remote(data)
            data.append(3)
            assert ray.get(ref, timeout=30) == [1, 2]
            with pytest.raises(TypeError, match="serialize"):
                streamer.echo.remote(threading.Lock())

    def test_a_dead_async_actors_loop_thread_ends(self) -> None:
        """Threads do not pile up: a killed async actor's loop stops."""
        with local_mode(strict=True):
            streamer = Streamer.remote()
            assert ray.get(streamer.echo.remote(1), timeout=30) == 1
            names = {t.name for t in threading.enumerate()}
            assert "raytrace_kit-local-actor-Streamer" in names
            ray.kill(streamer)
        deadline = time.monotonic() + 10
        while any(t.name == "raytrace_kit-local-actor-Streamer" for t in threading.enumerate()):
            assert time.monotonic() < deadline, "the loop thread outlived its actor"
            time.sleep(0.05)


@pytest.mark.usefixtures("no_ray")
class TestGenerators:
    """Generators give a ref per item, made as the caller iterates; errors come after them."""

    def test_generator_gives_refs_and_fails_where_it_failed(self) -> None:
        """A generator task gives one ref per item; an error surfaces after the items."""
        with local_mode():
            assert [ray.get(r) for r in countdown.remote(3)] == [3, 2, 1]
            refs = list(countdown.remote(3, fail_at=1))
            assert [ray.get(r) for r in refs[:2]] == [3, 2]
            with pytest.raises(ValueError, match="failed at 1"):
                ray.get(refs[2])

    def test_async_generator_streams_to_sync_and_async_callers(self) -> None:
        """An async generator method yields ObjectRefs, to `for` and to `async for`."""

        async def consume(refs: Any) -> list[int]:
            return [await ref async for ref in refs]

        with local_mode(strict=True):
            gate = Gate.remote()
            assert [ray.get(ref) for ref in gate.stream.remote(3)] == [0, 1, 2]
            assert asyncio.run(consume(gate.stream.remote(2))) == [0, 1]

    def test_generator_runs_as_the_caller_iterates(self) -> None:
        """Each next() runs the generator to its next yield; code in between is not the call."""
        SEEN.clear()
        with local_mode(strict=True):
            refs = produce.remote(3)
            assert SEEN == []  # nothing ran at .remote()
            assert ray.get(next(refs)) == 0
            assert SEEN == ["made 0"]
            # Between two steps, the caller is not inside the generator's call.
            assert ray.get_runtime_context().get_task_id() is None
            assert [ray.get(ref) for ref in refs] == [1, 2]
        start, end = events_of(produce)
        assert (start["event"], end["event"], end["status"]) == ("call.start", "call.end", "ok")
        assert start["call_id"] == end["call_id"]

    def test_killing_an_actor_mid_stream_says_so(self) -> None:
        """The next ref of a killed actor's generator raises ActorDiedError."""
        with local_mode(strict=True):
            streamer = Streamer.remote()
            refs = streamer.items.remote(3)
            assert ray.get(next(refs)) == 0
            ray.kill(streamer)
            with pytest.raises(ActorDiedError):
                ray.get(next(refs))
            assert list(refs) == []

    def test_a_killed_stream_leaves_nothing_pending(self) -> None:
        """The killed actor's generator is closed at once: asyncio reports nothing at exit.

        It was left suspended for the loop's end: "Task was destroyed but it is pending!"
        on every Python, and from 3.13 a RuntimeWarning that its aclose was never awaited.
        """
        code = (
            "import ray\n"
            "from raytrace_kit import local_mode\n"
            "from tests.integration.local.test_async import Streamer\n"
            "with local_mode(strict=True):\n"
            "    refs = (streamer := Streamer.remote()).items.remote(3)\n"
            "    ray.get(next(refs))\n"
            "    ray.kill(streamer)\n"
            "    try:\n"
            "        ray.get(next(refs))\n"
            "    except ray.exceptions.ActorDiedError:\n"
            "        print('died')\n"
        )
        done = subprocess.run(
            [sys.executable, "-W", "always", "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).parents[3],
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "died"
        assert "pending" not in done.stderr
        assert "never awaited" not in done.stderr


@pytest.mark.usefixtures("no_ray")
class TestRuntimeContext:
    """Inside a call, on the caller's thread or an actor's loop: its own ids, and its parent."""

    def test_runtime_context_gives_the_ids_the_events_carry(self) -> None:
        """Inside a local call, the context's ids are those of its call.end event."""
        with local_mode(strict=True):
            seen = ray.get(ids.remote())
            again = ray.get(ids.remote())
        (end, end_again) = events_of(ids, "call.end")
        assert {key: end[key] for key in seen} == seen
        assert seen["task_id"] != again["task_id"] == end_again["task_id"]
        assert seen["worker_id"] == again["worker_id"]  # one process: one worker
        assert not ray.is_initialized()

    def test_local_calls_name_their_parent(self) -> None:
        """A call made during a local call names it, on the caller's thread or a loop."""
        with local_mode(strict=True):
            ray.get(outer.remote())
        (parent,) = events_of(outer, "call.start")
        (task,) = events_of(ids, "call.start")
        method = next(e for e in events_of(Gate, "call.start") if e["function"].endswith("open"))
        assert parent["parent_call_id"] is None
        for start in (task, method):
            assert (start["parent_call_id"], start["parent_task_id"]) == (
                parent["call_id"],
                parent["task_id"],
            )


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


@debuggable(stuck_after=0.3)
@ray.remote
class LocalWaiter:
    async def hang(self) -> None:
        await asyncio.Event().wait()  # LocalWaiter.hang hangs


@pytest.mark.usefixtures("no_ray")
def test_local_mode_async_calls_are_watched_and_shown_without_ray() -> None:
    """A local async actor's call that hangs: call.stuck, and stuck() with no cluster."""
    with local_mode():
        waiter = LocalWaiter.remote()
        waiter.hang.remote()
        (event,) = helpers.wait_until(
            lambda: helpers.events_of(LocalWaiter, "call.stuck")[:1], "the local call's report"
        )
        assert event["stack"][-1][:3] == [__file__, _line_of("LocalWaiter.hang hangs"), "hang"]
        found = raytrace_kit.stuck()
    (flight,) = [f for f in found.running if f.function.endswith(".hang")]
    assert flight.where == f"{__file__}:{_line_of('LocalWaiter.hang hangs')}"
    assert "local mode" in found.source

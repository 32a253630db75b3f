"""Local mode's scheduler and boundaries: async actors, lazy generators, context, strictness.

Run without Ray (as users run local mode), except the test of plain calls with Ray up.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import traceback
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import ray
from ray.exceptions import ActorDiedError, GetTimeoutError

from raytrace_kit import LocalModeError, RaytraceKitWarning, debuggable, local_mode
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
def asks_the_cluster() -> str:
    return str(ray.get_runtime_context().gcs_address)


@ray.remote
def plain_square(x: int) -> int:
    return x * x


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
class Recorder:
    def __init__(self) -> None:
        self.order: list[str] = []

    def items(self, n: int) -> Iterator[int]:
        for i in range(n):
            self.order.append(f"item {i}")
            yield i

    def mark(self) -> list[str]:
        self.order.append("mark")
        return self.order


@pytest.mark.usefixtures("no_ray")
class TestScheduler:
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

    def test_async_generator_streams_to_sync_and_async_callers(self) -> None:
        """An async generator method yields ObjectRefs, to `for` and to `async for`."""

        async def consume(refs: Any) -> list[int]:
            return [await ref async for ref in refs]

        with local_mode(strict=True):
            gate = Gate.remote()
            assert [ray.get(ref) for ref in gate.stream.remote(3)] == [0, 1, 2]
            assert asyncio.run(consume(gate.stream.remote(2))) == [0, 1]

    def test_killing_an_async_actor_fails_its_running_call(self) -> None:
        """ray.kill while a call awaits: its ref raises ActorDiedError, as in Ray."""
        with local_mode(strict=True):
            gate = Gate.remote()
            waiting = gate.wait.remote()
            ray.kill(gate)
            with pytest.raises(ActorDiedError):
                ray.get(waiting, timeout=30)

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

    def test_sync_actor_finishes_a_generator_before_its_next_call(self) -> None:
        """As in Ray, a sync actor runs one call at a time: the generator ends first."""
        with local_mode(strict=True):
            recorder = Recorder.remote()
            refs = recorder.items.remote(3)
            assert ray.get(next(refs)) == 0
            order = ray.get(recorder.mark.remote())
            assert order == ["item 0", "item 1", "item 2", "mark"]
            assert [ray.get(ref) for ref in refs] == [1, 2]  # the rest, already made

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

    def test_what_needs_a_cluster_raises_naming_local_mode(self) -> None:
        """The GCS address cannot be had without a cluster: an error, and none is started."""
        with local_mode(strict=True):
            ref = asks_the_cluster.remote()
            with pytest.raises(LocalModeError, match="local mode"):
                ray.get(ref)
        assert not ray.is_initialized()

    def test_strict_mode_refuses_plain_calls_and_starts_nothing(self) -> None:
        """local_mode(strict=True): a plain @ray.remote call raises, naming the function."""
        with local_mode(strict=True), pytest.raises(LocalModeError) as raised:
            plain_square.remote(3)
        message = str(raised.value)
        assert "plain_square" in message
        assert "@debuggable" in message
        assert "Ray is not initialized, so this would start a cluster" in message
        assert not ray.is_initialized()

    def test_ray_local_fixture_is_strict(self, ray_local: None) -> None:
        """The pytest fixture turns plain calls into errors."""
        with pytest.raises(LocalModeError, match="plain_square"):
            plain_square.remote(2)
        assert not ray.is_initialized()


@pytest.mark.usefixtures("ray_session")
def test_plain_call_warns_once_and_runs_on_ray() -> None:
    """Not strict: a plain call warns once per function, naming it, and runs on Ray."""
    with warnings.catch_warnings(record=True) as caught, local_mode():
        warnings.simplefilter("always")
        results = ray.get([plain_square.remote(3), plain_square.remote(4)])
    assert results == [9, 16]
    ours = [w for w in caught if issubclass(w.category, RaytraceKitWarning)]
    assert len(ours) == 1
    assert "plain_square" in str(ours[0].message)
    assert "@debuggable" in str(ours[0].message)
    assert ours[0].filename == __file__  # points at the user's call


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
class TestReviewFindings:
    """Cases a review of local mode found, each fixed and kept here."""

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

    def test_kill_of_a_non_actor_starts_no_cluster(self) -> None:
        """Ray's ValueError, without starting a cluster to give it."""
        with local_mode(strict=True), pytest.raises(ValueError, match="only supported for actors"):
            ray.kill(3)
        assert not ray.is_initialized()

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

    def test_local_traceback_starts_in_user_code(self) -> None:
        """ray.get's traceback holds the user's frames, not the kit's."""
        with local_mode(strict=True):
            ref = asks_the_cluster.remote()
            with pytest.raises(LocalModeError) as raised:
                ray.get(ref)
        frames = traceback.extract_tb(raised.value.__traceback__)
        kit = [f for f in frames if "/raytrace_kit/_local/" in f.filename]
        assert [f.name for f in frames if f.filename == __file__][-1] == "asks_the_cluster"
        assert all(f.name not in {"execute_call", "_call_into"} for f in kit)
